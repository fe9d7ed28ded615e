package runobserve_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/runobserve"
	"github.com/reconcilerhq/reconciler/internal/runobserve/runobservetest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

func TestKeysAreBoundedAndClaimedOnce(t *testing.T) {
	t.Parallel()
	k := runobserve.NewKeys(3)
	for i := range 10 {
		require.True(t, k.Claim(fmt.Sprint(i)))
		require.LessOrEqual(t, k.Len(), 3)
	}
	require.Equal(t, 3, k.Len())
	require.True(t, k.Has("9") && k.Has("8") && k.Has("7"), "the newest keys stay")
	require.False(t, k.Has("0"), "the oldest went")
	k.Forget("9")
	require.False(t, k.Has("9"))
	require.Equal(t, runobserve.DefaultKeys, func() int {
		d := runobserve.NewKeys(0)
		for i := range runobserve.DefaultKeys + 10 {
			d.Add(fmt.Sprint(i))
		}
		return d.Len()
	}())

	var won atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if k.Claim("race") {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int32(1), won.Load(), "one of concurrent claims wins")
}

// failing is a store whose writes fail with err.
type failing struct {
	ports.RunStore
	err error
}

func (f failing) RunObserve(context.Context, ports.RunObserveParams) (int64, error) { return 0, f.err }

func TestWriterWakesOnPhaseChangesOnly(t *testing.T) {
	t.Parallel()
	store := runobservetest.NewStore("acme/shop")
	var wakes []reconcile.RunRef
	w := runobserve.NewWriter(store, nil, func(_ context.Context, ref reconcile.RunRef) { wakes = append(wakes, ref) }, nil, nil, time.Second)
	ref := reconcile.RunRef{Kind: reconcile.KindRepo, ID: "r"}
	require.True(t, w.Write(t.Context(), ports.RunObserveParams{Ref: ref, Heartbeat: time.Now()}))
	require.Empty(t, wakes, "a heartbeat wakes nothing")
	require.True(t, w.Write(t.Context(), ports.RunObserveParams{Ref: ref, Pod: &reconcile.Pod{Phase: reconcile.PodRunning}}))
	require.Equal(t, []reconcile.RunRef{ref}, wakes)
	require.Len(t, store.Observed, 2)

	events := &runobservetest.Events{}
	gone := runobserve.NewWriter(failing{err: fmt.Errorf("write: %w", ports.ErrNotFound)}, nil, nil, events.Logger(), nil, time.Second)
	require.False(t, gone.Write(t.Context(), ports.RunObserveParams{Ref: ref}), "the run is gone: stop observing")
	flaky := runobserve.NewWriter(failing{err: errors.New("connection reset")}, nil, nil, events.Logger(), nil, time.Second)
	require.True(t, flaky.Write(t.Context(), ports.RunObserveParams{Ref: ref}), "a failed write: go on")
	require.Equal(t, 2, events.Count("agent.observe_failed", ref))
}

func TestExitedAddsTheDoneFactAndTheHook(t *testing.T) {
	t.Parallel()
	var hooked []string
	w := runobserve.NewWriter(runobservetest.NewStore(""), nil, nil, nil,
		func(_ context.Context, ref reconcile.RunRef, dir string, o *ports.RunObserveParams) {
			hooked = append(hooked, ref.ID+"@"+dir)
			o.Patch = map[string]any{"hooked": true, "review_done": o.Patch["review_done"], "review": o.Patch["review"]}
		}, time.Second)
	at := time.Unix(1700000000, 0)
	zero, three := 0, 3
	ref := reconcile.RunRef{Kind: reconcile.KindPRReview, ID: "rv"}
	draft := &reconcile.ReviewDraft{Body: "fine"}
	o := w.Exited(t.Context(), ref, "/work/rv", reconcile.Pod{Phase: reconcile.PodTerminated, ExitCode: &zero}, at, draft)
	require.Equal(t, at, o.Heartbeat)
	require.Equal(t, map[string]any{"hooked": true, "review_done": true, "review": draft}, o.Patch)
	o = w.Exited(t.Context(), ref, "", reconcile.Pod{Phase: reconcile.PodTerminated, ExitCode: &three}, at, draft)
	require.Equal(t, map[string]any{"hooked": true, "review_done": nil, "review": nil}, o.Patch, "no done fact nor draft on a failure")
	require.Equal(t, []string{"rv@/work/rv", "rv@"}, hooked)
}

func TestReviewIsCappedOnACharacterAndSaysSo(t *testing.T) {
	t.Parallel()
	note := "\n\n(reconciler: the agent's review may be longer; its runtime brings back at most 5 bytes.)"
	for _, tc := range []struct {
		body, event string
		want        reconcile.ReviewDraft
	}{
		{"ok", " approve\n", reconcile.ReviewDraft{Body: "ok", Event: "APPROVE"}},
		{"ok", "LGTM", reconcile.ReviewDraft{Body: "ok"}},                          // not a verdict: the review comments
		{"abcdé", "", reconcile.ReviewDraft{Body: "abcd" + note, Truncated: true}}, // é ends past byte 5
		{"abcdef", "", reconcile.ReviewDraft{Body: "abcde" + note, Truncated: true}},
		{"abcde", "", reconcile.ReviewDraft{Body: "abcde" + note, Truncated: true}}, // at the limit: maybe cut before
	} {
		require.Equal(t, tc.want, *runobserve.Review(tc.body, tc.event, 5), "%q", tc.body)
	}
	body, event := runobserve.SplitReviewEvent("review-event: APPROVE\nfine\nreally")
	require.Equal(t, []string{"fine\nreally", "APPROVE"}, []string{body, event})
	body, event = runobserve.SplitReviewEvent("fine\nreview-event: APPROVE")
	require.Equal(t, []string{"fine\nreview-event: APPROVE", ""}, []string{body, event}, "only the first line")
}
