package main

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/github/githubtest"
	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// serveRepoRun starts `serve --dsn` as a process with the process runtime
// (its agent exits 0 at once, as if it pushed its branch) and the github
// code host pointed at a fake whose new pull requests get checks, creates
// a repo run with auto-merge through the API (with a token of scope read
// and write) and waits until the run is in want. It returns the states the
// serve process logged the run moving through and the fake.
func serveRepoRun(t *testing.T, checks githubtest.CheckRun, approve bool, want reconcile.State) ([]string, *githubtest.Server) {
	t.Helper()
	bin, dsn, token := dsnWithRunsToken(t)
	fake := githubtest.New("gh-token")
	t.Cleanup(fake.Close)
	fake.Opened = func(pr githubtest.PR) {
		fake.SetChecks(pr.HeadSHA, checks)
		if approve {
			fake.AddReview(pr.Number, githubtest.Review{User: "ann", State: "APPROVED"})
		}
	}
	log := &procLog{keep: []string{"reconcile.decision", "listening"}}
	cmd := exec.Command(bin, "serve", "--dsn", dsn, "--listen", "127.0.0.1:0", "--lock", "2s", "--outbound-allow", "127.0.0.0/8",
		"--agent-command", "sh", "--agent-arg=-c", "--agent-arg", "exit 0", "--agent-workdir", t.TempDir(),
		"--github-api", fake.URL, "--github-token", "env:RECONCILER_SECRET_GH", "--github-merge-method", "squash",
		"--pr-poll-interval", "200ms")
	cmd.Env = append(os.Environ(), "RECONCILER_DSN=", "RECONCILER_SECRET_GH=gh-token")
	startProcessLog(t, cmd, "engine starting", "serve", log)
	ctx := context.Background()
	c := serveClient(t, log, token)
	ref := reconcile.RunRef{Kind: reconcile.KindRepo, ID: "task-e2e"}
	_, err := c.CreateRun(ctx, api.RunCreate{Kind: ref.Kind, ID: ref.ID, Repo: "acme/api", MaxRetries: 1,
		Settings: reconcile.Settings{AutoMerge: true}})
	require.NoError(t, err)

	// The run's row reaches want before the serve process logs the
	// decision that moved it there: wait for both.
	move := regexp.MustCompile(`from=(\S+) to=(\S+)`)
	applied := regexp.MustCompile(`outcome=applied`)
	var states []string
	waitUntil(t, 60*time.Second, func() bool {
		row, err := c.Run(ctx, ref, 0)
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
	// The run's decision history, read through the API, holds the same moves.
	v, err := c.Run(ctx, ref, ports.RunDecisionsKept)
	require.NoError(t, err)
	var moves []string
	for i := len(v.Decisions) - 1; i >= 0; i-- {
		if d := v.Decisions[i]; d.To != "" {
			if len(moves) == 0 {
				moves = append(moves, string(d.From))
			}
			moves = append(moves, string(d.To))
		}
	}
	require.Equal(t, states, moves, "decisions: %+v", v.Decisions)
	return states, fake
}

// dsnWithRunsToken skips a short run; else it builds the binary, makes a
// database schema and an API token of scope read and write on it, and
// returns the binary, the schema's DSN and the token's secret.
func dsnWithRunsToken(t *testing.T) (bin, dsn, token string) {
	t.Helper()
	if testing.Short() {
		t.Skip("process test")
	}
	bin, err := buildBinary()
	require.NoError(t, err)
	dsn, _ = pgtest.Schema(t)
	return bin, dsn, createToken(t, bin, dsn, "runs-bot", "read,write")
}

// serveClient is an API client of the serve process whose log (keeping
// "listening" lines) is log, with token.
func serveClient(t *testing.T, log *procLog, token string) *client.Client {
	t.Helper()
	lines := log.matching("listening")
	require.NotEmpty(t, lines)
	addr := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(lines[0].text)
	require.NotNil(t, addr, lines[0].text)
	c, err := client.New("http://"+addr[1], token)
	require.NoError(t, err)
	return c
}

// TestServeDSNRepoRunMerges: on PostgreSQL, a repo run's real agent
// process exits 0, its branch becomes a pull request on the (fake) code
// host, CI passes and a reviewer approves, auto-merge merges it, and the
// run completes.
func TestServeDSNRepoRunMerges(t *testing.T) {
	t.Parallel()
	states, fake := serveRepoRun(t, githubtest.CheckRun{Status: "completed", Conclusion: "success"}, true, reconcile.RepoCompleted)
	require.Equal(t, []string{"pending", "queued", "provisioning", "running", "pr_opened", "completed"}, states)
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
	require.Equal(t, []string{"pending", "queued", "provisioning", "running", "pr_opened", "needs_attention"}, states)
	pr, _ := fake.GetPR(1)
	require.False(t, pr.Merged)
}
