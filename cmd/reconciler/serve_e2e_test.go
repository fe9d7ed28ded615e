package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/github/githubtest"
	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// serveRepoRun starts `serve --dsn` as a process with the process runtime
// (its agent exits 0 at once, as if it pushed its branch) and the github
// code host pointed at a fake whose new pull requests get checks, stores
// a repo run with auto-merge (the API that would create it is not in main
// yet, so the test writes it through the Postgres run store, as the API
// will) and waits until the run is in want. It returns the states the
// serve process logged the run moving through and the fake.
func serveRepoRun(t *testing.T, checks githubtest.CheckRun, approve bool, want reconcile.State) ([]string, *githubtest.Server) {
	t.Helper()
	if testing.Short() {
		t.Skip("process test")
	}
	bin, err := buildBinary()
	require.NoError(t, err)
	dsn, _ := pgtest.Schema(t)
	fake := githubtest.New("gh-token")
	t.Cleanup(fake.Close)
	fake.Opened = func(pr githubtest.PR) {
		fake.SetChecks(pr.HeadSHA, checks)
		if approve {
			fake.AddReview(pr.Number, githubtest.Review{User: "ann", State: "APPROVED"})
		}
	}
	log := &procLog{keep: []string{"reconcile.decision"}}
	cmd := exec.Command(bin, "serve", "--dsn", dsn, "--listen", "", "--lock", "2s",
		"--agent-command", "sh", "--agent-arg=-c", "--agent-arg", "exit 0", "--agent-workdir", t.TempDir(),
		"--github-api", fake.URL, "--github-token", "env:RECONCILER_SECRET_GH", "--github-merge-method", "squash",
		"--pr-poll-interval", "200ms")
	cmd.Env = append(os.Environ(), "RECONCILER_DSN=", "RECONCILER_SECRET_GH=gh-token")
	startProcessLog(t, cmd, "engine starting", "serve", log)

	ctx := context.Background()
	db, err := postgres.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	store, q := postgres.NewRunStore(db, ports.SystemClock), postgres.NewQueue(db, ports.SystemClock)
	t.Cleanup(q.Close)
	ref := reconcile.RunRef{Kind: reconcile.KindRepo, ID: "task-e2e"}
	body, err := json.Marshal(reconcile.RepoRun{MaxRetries: 1})
	require.NoError(t, err)
	_, err = store.RunCreate(ctx, ports.RunRow{Ref: ref, State: reconcile.RepoQueued, Repo: "acme/api", Body: body,
		Settings: reconcile.Settings{AutoMerge: true}})
	require.NoError(t, err)
	require.NoError(t, q.WorkEnqueue(ctx, ports.EnqueueParams{Key: runs.Key(ref)}))

	// The run's row reaches want before the serve process logs the
	// decision that moved it there: wait for both.
	move := regexp.MustCompile(`from=(\S+) to=(\S+)`)
	applied := regexp.MustCompile(`outcome=applied`)
	var states []string
	waitUntil(t, 60*time.Second, func() bool {
		row, err := store.RunGet(ctx, ref)
		require.NoError(t, err)
		if row.State != want {
			return false
		}
		states = states[:0]
		for _, l := range log.matching("id=" + ref.ID) {
			m := move.FindStringSubmatch(l.text)
			if m == nil || !applied.MatchString(l.text) {
				continue
			}
			if len(states) == 0 {
				states = append(states, m[1])
			}
			states = append(states, m[2])
		}
		return len(states) > 0 && states[len(states)-1] == string(want)
	})
	return states, fake
}

// TestServeDSNRepoRunMerges: on PostgreSQL, a repo run's real agent
// process exits 0, its branch becomes a pull request on the (fake) code
// host, CI passes and a reviewer approves, auto-merge merges it, and the
// run completes.
func TestServeDSNRepoRunMerges(t *testing.T) {
	t.Parallel()
	states, fake := serveRepoRun(t, githubtest.CheckRun{Status: "completed", Conclusion: "success"}, true, reconcile.RepoCompleted)
	require.Equal(t, []string{"queued", "provisioning", "running", "pr_opened", "completed"}, states)
	pr, ok := fake.GetPR(1)
	require.True(t, ok)
	require.True(t, pr.Merged, "merged on the code host")
	require.Equal(t, "squash", pr.MergeMethod)
	require.Equal(t, "reconciler/task-e2e", pr.Head)
}

// TestServeDSNRepoRunCIFailsNeedsAttention: CI fails on the agent's pull
// request; with auto-resume off the run needs attention, unmerged.
func TestServeDSNRepoRunCIFailsNeedsAttention(t *testing.T) {
	t.Parallel()
	states, fake := serveRepoRun(t, githubtest.CheckRun{Status: "completed", Conclusion: "failure"}, true, reconcile.RepoNeedsAttention)
	require.Equal(t, []string{"queued", "provisioning", "running", "pr_opened", "needs_attention"}, states)
	pr, _ := fake.GetPR(1)
	require.False(t, pr.Merged)
}
