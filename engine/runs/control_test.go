package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

func setupControl(t *testing.T) (runBundle, *runs.Control) {
	t.Helper()
	b := setupRuns(t)
	return b, &runs.Control{Store: b.store, Queue: b.q, Clock: ports.SystemClock}
}

// requireField asserts err is a *release.FieldError naming field.
func requireField(t *testing.T, err error, field string) {
	t.Helper()
	var fe *release.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, field, fe.Field, "%v", err)
}

// TestControlCreateUnknownDependency: a repo run depending on one that does
// not exist is refused at once, naming it, and nothing is stored (issue 29).
func TestControlCreateUnknownDependency(t *testing.T) {
	t.Parallel()
	b, c := setupControl(t)
	ctx := context.Background()
	_, err := c.Create(ctx, runs.CreateParams{Kind: reconcile.KindRepo, ID: "r1", Repo: "acme/api", DependsOn: []string{"nosuch"}})
	requireField(t, err, "depends_on[0]")
	require.ErrorContains(t, err, `"nosuch" does not exist`)
	_, err = b.store.RunGet(ctx, reconcile.RunRef{Kind: reconcile.KindRepo, ID: "r1"})
	require.ErrorIs(t, err, ports.ErrNotFound)
}

func TestControlCreate(t *testing.T) {
	t.Parallel()
	b, c := setupControl(t)
	ctx := context.Background()
	for _, tc := range []struct {
		p     runs.CreateParams
		state reconcile.State
	}{
		{runs.CreateParams{Kind: reconcile.KindRepo, ID: "r0", Repo: "acme/api"}, reconcile.RepoPending},
		{runs.CreateParams{Kind: reconcile.KindRepo, ID: "r1", Repo: "acme/api", MaxRetries: 2, DependsOn: []string{"r0"}}, reconcile.RepoPending},
		{runs.CreateParams{Kind: reconcile.KindStandalone, ID: "s1", Workflow: "nightly"}, reconcile.StandaloneQueued},
		{runs.CreateParams{Kind: reconcile.KindPRReview, ID: "p1", PRURL: "https://example.test/pr/1"}, reconcile.ReviewQueued},
		{runs.CreateParams{Kind: reconcile.KindPersistentAgent, ID: "a1"}, reconcile.AgentIdle},
	} {
		row, err := c.Create(ctx, tc.p)
		require.NoError(t, err, "%s", tc.p.Kind)
		require.Equal(t, tc.state, row.State)
		require.Equal(t, int64(1), row.Version)
		it, err := b.q.WorkGet(ctx, runs.Key(row.Ref))
		require.NoError(t, err, "the new run is woken")
		require.Equal(t, runs.Key(row.Ref), it.Key)
	}
	row, err := b.store.RunGet(ctx, reconcile.RunRef{Kind: reconcile.KindRepo, ID: "r1"})
	require.NoError(t, err)
	var repo reconcile.RepoRun
	require.NoError(t, json.Unmarshal(row.Body, &repo))
	require.Equal(t, "acme/api", repo.Repo)
	require.Equal(t, 2, repo.MaxRetries)
	require.Equal(t, []string{"r0"}, row.DependsOn)

	_, err = c.Create(ctx, runs.CreateParams{Kind: reconcile.KindPersistentAgent, ID: "a1"})
	require.ErrorIs(t, err, ports.ErrConflict, "a taken id")

	for _, tc := range []struct {
		p     runs.CreateParams
		field string
	}{
		{runs.CreateParams{Kind: "job", ID: "x"}, "kind"},
		{runs.CreateParams{Kind: reconcile.KindPersistentAgent}, "id"},
		{runs.CreateParams{Kind: reconcile.KindPersistentAgent, ID: "../up"}, "id"},
		{runs.CreateParams{Kind: reconcile.KindPersistentAgent, ID: strings.Repeat("a", 256)}, "id"},
		{runs.CreateParams{Kind: reconcile.KindRepo, ID: "x"}, "repo"},
		{runs.CreateParams{Kind: reconcile.KindRepo, ID: "x", Repo: "a\x1b[2J"}, "repo"},
		{runs.CreateParams{Kind: reconcile.KindStandalone, ID: "x"}, "workflow"},
		{runs.CreateParams{Kind: reconcile.KindPRReview, ID: "x"}, "pr_url"},
		{runs.CreateParams{Kind: reconcile.KindPersistentAgent, ID: "x", Repo: "acme/api"}, "repo"},
		{runs.CreateParams{Kind: reconcile.KindPRReview, ID: "x", PRURL: "u", MaxRetries: 1}, "max_retries"},
		{runs.CreateParams{Kind: reconcile.KindRepo, ID: "x", Repo: "r", MaxRetries: -1}, "max_retries"},
		{runs.CreateParams{Kind: reconcile.KindRepo, ID: "x", Repo: "r", DependsOn: []string{"x"}}, "depends_on[0]"},
		{runs.CreateParams{Kind: reconcile.KindStandalone, ID: "x", Workflow: "w", DependsOn: []string{"y"}}, "depends_on"},
	} {
		_, err := c.Create(ctx, tc.p)
		requireField(t, err, tc.field)
		_, err = b.store.RunGet(ctx, reconcile.RunRef{Kind: tc.p.Kind, ID: tc.p.ID})
		if tc.p.Kind.Valid() && tc.p.ID != "" && tc.p.ID != "a1" {
			require.ErrorIs(t, err, ports.ErrNotFound, "bad input stores nothing")
		}
	}
}

func TestControlIntent(t *testing.T) {
	t.Parallel()
	b, c := setupControl(t)
	ctx := context.Background()
	ref := createAgent(t, b.store, "ag", reconcile.AgentIdle, reconcile.AgentRun{})

	// The kernel refuses resume on an idle agent: 409 with its reason, nothing stored.
	before, err := b.store.RunGet(ctx, ref)
	require.NoError(t, err)
	_, _, err = c.Intent(ctx, ref, reconcile.IntentResume, "alice")
	var refused *runs.IntentRefusedError
	require.ErrorAs(t, err, &refused)
	require.ErrorIs(t, err, ports.ErrConflict)
	require.Equal(t, "resume-not-applicable", refused.Reason)
	after, err := b.store.RunGet(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, before.Version, after.Version, "a refused intent changes nothing")

	// Pause is stored, recorded with its author, and applied by the next pass.
	row, action, err := c.Intent(ctx, ref, reconcile.IntentPause, "alice")
	require.NoError(t, err)
	require.Equal(t, "intent-pause", action.Why())
	require.Contains(t, string(row.Body), `"control_intent":"pause"`)
	// Asking it again is a no-op; another intent while it is pending is refused.
	again, _, err := c.Intent(ctx, ref, reconcile.IntentPause, "bob")
	require.NoError(t, err)
	require.Equal(t, row.Version, again.Version)
	_, _, err = c.Intent(ctx, ref, reconcile.IntentArchive, "bob")
	require.ErrorAs(t, err, &refused)
	require.Contains(t, refused.Reason, "pause is still pending")

	b.proc(reconcile.KindPersistentAgent).Process(ctx, engine.Item{Key: runs.Key(ref), Attempt: 1})
	row, err = b.store.RunGet(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, reconcile.AgentPaused, row.State)
	hist, err := b.store.RunDecisions(ctx, ref, 0)
	require.NoError(t, err)
	require.Len(t, hist, 2)
	require.Equal(t, ports.RunDecision{Version: hist[1].Version, At: hist[1].At, Action: "intent", Reason: "pause", By: "alice"}, hist[1])
	require.Equal(t, "intent-pause", hist[0].Reason)
	require.Equal(t, reconcile.AgentPaused, hist[0].To)

	_, _, err = c.Intent(ctx, ref, "explode", "alice")
	requireField(t, err, "intent")
	_, _, err = c.Intent(ctx, reconcile.RunRef{Kind: reconcile.KindRepo, ID: "none"}, reconcile.IntentCancel, "alice")
	require.ErrorIs(t, err, ports.ErrNotFound)
}

func TestControlMessage(t *testing.T) {
	t.Parallel()
	b, c := setupControl(t)
	ctx := context.Background()
	ref := createAgent(t, b.store, "ag", reconcile.AgentIdle, reconcile.AgentRun{})
	for i := range reconcile.MaxInbox + 2 {
		_, err := c.Message(ctx, ref, fmt.Sprintf("hello %d", i), "alice")
		require.NoError(t, err)
	}
	row, err := b.store.RunGet(ctx, ref)
	require.NoError(t, err)
	var run reconcile.AgentRun
	require.NoError(t, json.Unmarshal(row.Body, &run))
	require.Len(t, run.Inbox, reconcile.MaxInbox, "the inbox keeps the newest")
	require.Equal(t, "hello 2", run.Inbox[0].Text)
	require.Equal(t, "alice", run.Inbox[0].By)
	require.Equal(t, reconcile.MaxInbox, run.PendingMessages)

	// The next pass starts a turn for them.
	b.proc(reconcile.KindPersistentAgent).Process(ctx, engine.Item{Key: runs.Key(ref), Attempt: 1})
	row, err = b.store.RunGet(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, reconcile.AgentQueued, row.State)

	_, err = c.Message(ctx, ref, "", "alice")
	requireField(t, err, "text")
	_, err = c.Message(ctx, ref, strings.Repeat("x", runs.MaxMessageBytes+1), "alice")
	requireField(t, err, "text")
	_, err = c.Message(ctx, reconcile.RunRef{Kind: reconcile.KindRepo, ID: "r"}, "hi", "alice")
	requireField(t, err, "kind")
	archived := createAgent(t, b.store, "gone", reconcile.AgentArchived, reconcile.AgentRun{})
	_, err = c.Message(ctx, archived, "hi", "alice")
	require.ErrorIs(t, err, ports.ErrConflict)
}
