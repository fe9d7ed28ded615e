package porttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

func runRowsAreCopies(t *testing.T, ctx context.Context, s ports.RunStore) {
	in := fullRow("c")
	want := fullRow("c")
	created := mustCreate(t, ctx, s, in)
	// Mutating what was passed in or handed out must not reach the store.
	in.Body[2] = 'X'
	in.DependsOn[0] = "mutated"
	in.Subtasks[0].ID = "mutated"
	*in.Pod.ExitCode = 99
	in.PR.Number = 99
	created.Body[2] = 'X'
	created.DependsOn[0] = "mutated"
	created.Subtasks[0].Blocking = false
	*created.Pod.ExitCode = 98
	created.Pod.Name = "mutated"
	created.PR.HeadSHA = "mutated"

	got, err := s.RunGet(ctx, want.Ref)
	require.NoError(t, err)
	requireSameRun(t, want, got)
	got.Body[2] = 'X'
	got.DependsOn[1] = "mutated"
	*got.Pod.ExitCode = 97

	page, err := s.RunList(ctx, ports.RunListParams{Kind: reconcile.KindRepo, Limit: 10})
	require.NoError(t, err)
	require.Len(t, page, 1)
	requireSameRun(t, want, page[0])
	page[0].Subtasks[1].State = "mutated"

	pod := &reconcile.Pod{Name: "obs", Phase: reconcile.PodRunning}
	patchValue := map[string]any{"k": "v"}
	_, err = s.RunObserve(ctx, ports.RunObserveParams{Ref: want.Ref, Pod: pod, Patch: map[string]any{"nested": patchValue}})
	require.NoError(t, err)
	pod.Name = "mutated"
	patchValue["k"] = "mutated"

	body := json.RawMessage(`{"n":1}`)
	_, err = s.RunUpdate(ctx, ports.RunUpdateParams{Ref: want.Ref, ExpectedVersion: 2, State: reconcile.RepoRunning, Body: body})
	require.NoError(t, err)
	body[1] = 'X'

	got, err = s.RunGet(ctx, want.Ref)
	require.NoError(t, err)
	want.Pod = &reconcile.Pod{Name: "obs", Phase: reconcile.PodRunning}
	want.Body = json.RawMessage(`{"n":1}`)
	requireSameRun(t, want, got)
}

// runConcurrentIncrements runs read-modify-CAS loops from many goroutines
// while observers patch the body: no increment and no observation is lost,
// and the conflicts the race produces were retried.
func runConcurrentIncrements(t *testing.T, ctx context.Context, s ports.RunStore) {
	const writers, increments, observers = 6, 15, 2
	ref := refOf(reconcile.KindPersistentAgent, "counter")
	mustCreate(t, ctx, s, baseRow(ref.Kind, ref.ID, reconcile.AgentIdle))

	var conflicts atomic.Int64
	// Every writer reads before any writer writes, so the first round
	// conflicts for all but one writer whatever the scheduling.
	var firstRead sync.WaitGroup
	firstRead.Add(writers)
	errs := make(chan error, writers+observers)
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- incrementLoop(ctx, s, ref, increments, &firstRead, &conflicts)
		}()
	}
	for o := range observers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- observeLoop(ctx, s, ref, o, increments)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	got, err := s.RunGet(ctx, ref)
	require.NoError(t, err)
	var body map[string]int
	require.NoError(t, json.Unmarshal(got.Body, &body))
	require.Equal(t, writers*increments, body["n"], "no increment was lost")
	for o := range observers {
		for i := range increments {
			require.Contains(t, body, fmt.Sprintf("obs-%d-%d", o, i), "no observation was lost")
		}
	}
	require.Equal(t, int64(1+writers*increments+observers*increments), got.Version, "every write bumped the version once")
	require.GreaterOrEqual(t, conflicts.Load(), int64(writers-1), "the racing writers conflicted and retried")
}

// incrementLoop adds one to body.n, increments times, retrying conflicts.
// Each writer's first read waits at the barrier before writing; a writer
// that fails early still releases the barrier.
func incrementLoop(ctx context.Context, s ports.RunStore, ref reconcile.RunRef, increments int, firstRead *sync.WaitGroup, conflicts *atomic.Int64) error {
	first := true
	defer func() {
		if first {
			firstRead.Done()
		}
	}()
	for done := 0; done < increments; {
		row, err := s.RunGet(ctx, ref)
		if err != nil {
			return err
		}
		var body map[string]any
		if err := json.Unmarshal(row.Body, &body); err != nil {
			return err
		}
		n, _ := body["n"].(float64)
		body["n"] = n + 1
		next, err := json.Marshal(body)
		if err != nil {
			return err
		}
		if first {
			first = false
			firstRead.Done()
			firstRead.Wait()
		}
		_, err = s.RunUpdate(ctx, ports.RunUpdateParams{Ref: ref, ExpectedVersion: row.Version, State: reconcile.AgentRunning, Body: next})
		switch {
		case errors.Is(err, ports.ErrConflict):
			conflicts.Add(1)
		case err != nil:
			return err
		default:
			done++
		}
	}
	return nil
}

// observeLoop patches distinct keys into the body, as producers do.
func observeLoop(ctx context.Context, s ports.RunStore, ref reconcile.RunRef, o, n int) error {
	for i := range n {
		if _, err := s.RunObserve(ctx, ports.RunObserveParams{Ref: ref, Heartbeat: time.Unix(int64(i), 0).UTC(), Patch: map[string]any{fmt.Sprintf("obs-%d-%d", o, i): i}}); err != nil {
			return err
		}
	}
	return nil
}
