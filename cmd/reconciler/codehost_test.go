package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/github"
	"github.com/reconcilerhq/reconciler/adapters/github/githubtest"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/internal/netguard"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// tokenResolver resolves env:GH to the fake GitHub's token.
type tokenResolver struct{}

func (tokenResolver) Resolve(_ context.Context, ref release.SecretRef) (string, error) {
	if ref.Ref == "env:GH" {
		return "tok", nil
	}
	return "", ports.ErrNotFound
}

// lockedBuffer is a goroutine-safe log sink.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// awaitMove waits until the last move logged of run id is last (the
// decision is logged after its state is stored, so a test that saw the
// state may read the log before the line is there) and returns the moves.
func (l *lockedBuffer) awaitMove(t *testing.T, id, last string) []string {
	t.Helper()
	var moves []string
	waitUntil(t, 10*time.Second, func() bool {
		moves = l.moves(t, id)
		return len(moves) > 0 && moves[len(moves)-1] == last
	})
	return moves
}

// moves returns the states a run moved through, from the decisions logged.
func (l *lockedBuffer) moves(t *testing.T, id string) []string {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range bytes.Split(bytes.TrimSpace(l.b.Bytes()), []byte("\n")) {
		var rec struct {
			Msg, ID, From, To, Outcome, Reason string
		}
		require.NoError(t, json.Unmarshal(line, &rec))
		if rec.Msg == "reconcile.decision" && rec.ID == id && rec.From != "" && rec.Outcome == runs.OutcomeApplied {
			if len(out) == 0 {
				out = append(out, rec.From)
			}
			out = append(out, rec.To+" ("+rec.Reason+")")
		}
	}
	return out
}

// setupGitHubWorld runs the engine with the process runtime (the agent
// exits 0 at once, as if it pushed its branch) and the github code host
// against a fake GitHub whose newly opened pull requests get checks.
func setupGitHubWorld(t *testing.T, checks githubtest.CheckRun, approve bool) (processWorld, *githubtest.Server, *lockedBuffer) {
	t.Helper()
	fake := githubtest.New(t, "tok")
	t.Cleanup(fake.Close)
	fake.Opened = func(pr githubtest.PR) {
		fake.SetChecks(pr.HeadSHA, checks)
		if approve {
			fake.AddReview(pr.Number, githubtest.Review{User: "ann", State: "APPROVED"})
		}
	}
	logs := &lockedBuffer{}
	w := setupWorld(t, "exit 0", logs, func(store ports.RunStore, q ports.Queue, log *slog.Logger) *githubHost {
		gh, err := newGitHubHost(context.Background(), codeHostOptions{api: fake.URL, token: "env:GH", mergeMethod: "squash",
			pollInterval: 20 * time.Millisecond}, store, q, tokenResolver{}, ports.SystemClock, log, netguard.Loopback)
		require.NoError(t, err)
		return gh
	})
	return w, fake, logs
}

// TestRepoRunEndToEndMerges: queued → provisioning → running → pr_opened
// (the agent's branch became a pull request) → the PR is approved with CI
// green and merged → completed.
func TestRepoRunEndToEndMerges(t *testing.T) {
	t.Parallel()
	w, fake, logs := setupGitHubWorld(t, githubtest.CheckRun{Status: "completed", Conclusion: "success"}, true)
	ref := reconcile.RunRef{Kind: reconcile.KindRepo, ID: "task-1"}
	b, err := json.Marshal(reconcile.RepoRun{MaxRetries: 1})
	require.NoError(t, err)
	_, err = w.store.RunCreate(context.Background(), ports.RunRow{Ref: ref, State: reconcile.RepoQueued, Body: b, Repo: "acme/api",
		Settings: reconcile.Settings{AutoMerge: true}})
	require.NoError(t, err)
	w.wake(t, ref)
	row := w.await(t, ref, reconcile.RepoCompleted)
	require.True(t, row.PR.Merged)
	require.Equal(t, []string{"queued", "provisioning (capacity-available)", "running (pod-ready)", "pr_opened (pr-detected)",
		"completed (pr-merged)"}, logs.awaitMove(t, ref.ID, "completed (pr-merged)"))
	pr, ok := fake.GetPR(1)
	require.True(t, ok)
	require.Equal(t, "reconciler/task-1", pr.Head)
	require.Equal(t, "main", pr.Base)
	require.True(t, pr.Merged)
	require.Equal(t, "squash", pr.MergeMethod)
}

// TestRepoRunEndToEndCIFailsNeedsAttention: CI fails on the agent's pull
// request and auto-resume is off, so the run needs attention.
func TestRepoRunEndToEndCIFailsNeedsAttention(t *testing.T) {
	t.Parallel()
	w, fake, logs := setupGitHubWorld(t, githubtest.CheckRun{Status: "completed", Conclusion: "failure"}, false)
	ref := reconcile.RunRef{Kind: reconcile.KindRepo, ID: "task-2"}
	_, err := w.store.RunCreate(context.Background(), ports.RunRow{Ref: ref, State: reconcile.RepoQueued, Body: []byte(`{}`), Repo: "acme/api",
		Settings: reconcile.Settings{AutoMerge: true}})
	require.NoError(t, err)
	w.wake(t, ref)
	row := w.await(t, ref, reconcile.RepoNeedsAttention)
	require.Equal(t, reconcile.ChecksFailing, row.PR.Checks)
	logs.awaitMove(t, ref.ID, "needs_attention (ci-failing-needs-attention)")
	pr, _ := fake.GetPR(1)
	require.False(t, pr.Merged, "a red pull request is never merged")
}

// TestReviewRunPostsTheAgentsReview: a PR review run's agent writes its
// review; the run submits it on GitHub, on the commit it reviewed.
func TestReviewRunPostsTheAgentsReview(t *testing.T) {
	t.Parallel()
	fake := githubtest.New(t, "tok")
	t.Cleanup(fake.Close)
	url := fake.AddPR(githubtest.PR{Number: 5, Owner: "o", Repo: "r", HeadSHA: "abc"})
	w := setupWorld(t, `printf 'Looks good.' > "$RECONCILER_REVIEW_FILE"; echo APPROVE > review-event`, io.Discard,
		func(store ports.RunStore, q ports.Queue, log *slog.Logger) *githubHost {
			gh, err := newGitHubHost(context.Background(), codeHostOptions{api: fake.URL, token: "env:GH",
				pollInterval: 20 * time.Millisecond}, store, q, tokenResolver{}, ports.SystemClock, log, netguard.Loopback)
			require.NoError(t, err)
			return gh
		})
	ref := reconcile.RunRef{Kind: reconcile.KindPRReview, ID: "rv"}
	b, err := json.Marshal(reconcile.PRReviewRun{PRURL: url})
	require.NoError(t, err)
	_, err = w.store.RunCreate(context.Background(), ports.RunRow{Ref: ref, State: reconcile.ReviewQueued, Body: b})
	require.NoError(t, err)
	w.wake(t, ref)
	w.await(t, ref, reconcile.ReviewSubmitted)
	reviews := fake.Reviews(5)
	require.Len(t, reviews, 1)
	require.Equal(t, "APPROVED", reviews[0].State)
	require.Equal(t, "abc", reviews[0].CommitID)
	require.True(t, strings.HasPrefix(reviews[0].Body, "Looks good.\n\n<!-- reconciler:"), reviews[0].Body)
}

// TestWebhookWakesTheRunOfItsPR: a signed check_suite delivery makes the
// run's PR observed at once.
func TestWebhookRefreshesTheRunOfItsPR(t *testing.T) {
	t.Parallel()
	fake := githubtest.New(t, "tok")
	t.Cleanup(fake.Close)
	url := fake.AddPR(githubtest.PR{Number: 1, Owner: "o", Repo: "r", HeadSHA: "s"})
	fake.SetChecks("s", githubtest.CheckRun{Status: "completed", Conclusion: "failure"})
	w := setupProcessWorld(t, "exit 0")
	gh, err := newGitHubHost(context.Background(), codeHostOptions{api: fake.URL, token: "env:GH", webhookSecret: "env:GH",
		pollInterval: time.Hour}, w.store, w.q, tokenResolver{}, ports.SystemClock, slog.New(slog.DiscardHandler), netguard.Loopback)
	require.NoError(t, err)
	ref := reconcile.RunRef{Kind: reconcile.KindRepo, ID: "t"}
	b, _ := json.Marshal(reconcile.RepoRun{PR: reconcile.PRFields{URL: url, Number: 1, State: reconcile.PROpen, Checks: reconcile.ChecksPending, HeadSHA: "s"}})
	_, err = w.store.RunCreate(context.Background(), ports.RunRow{Ref: ref, State: reconcile.RepoPROpened, Body: b, Repo: "o/r"})
	require.NoError(t, err)
	body := []byte(`{"check_suite":{"pull_requests":[{"number":1}]},"repository":{"full_name":"o/r","html_url":"` + fake.URL + `/o/r"}}`)
	req := httptestRequest(t, body, github.Sign([]byte("tok"), body))
	rec := httptestRecorder()
	gh.hook.ServeHTTP(rec, req)
	require.Equal(t, 204, rec.Code)
	row := w.await(t, ref, reconcile.RepoNeedsAttention)
	require.Equal(t, reconcile.ChecksFailing, row.PR.Checks)
}

func httptestRequest(t *testing.T, body []byte, sig string) *http.Request {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, githubWebhookPath, bytes.NewReader(body))
	req.Header.Set("X-GitHub-Event", "check_suite")
	req.Header.Set("X-Hub-Signature-256", sig)
	return req
}

func httptestRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

// decisions counts the decisions logged for run id (any outcome).
func (l *lockedBuffer) decisions(t *testing.T, id string) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range bytes.Split(bytes.TrimSpace(l.b.Bytes()), []byte("\n")) {
		var rec struct{ Msg, ID string }
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "reconcile.decision" && rec.ID == id {
			n++
		}
	}
	return n
}

// TestBlockingSubtaskHoldsTheAutoMerge: a repo run whose pull request is
// approved with CI green is not merged while a blocking subtask (set
// through runs.Control, as the API and CLI do) has not completed; once it
// completes, the run merges. The subtask's state is read afresh each
// pass.
func TestBlockingSubtaskHoldsTheAutoMerge(t *testing.T) {
	t.Parallel()
	w, fake, logs := setupGitHubWorld(t, githubtest.CheckRun{Status: "completed", Conclusion: "success"}, true)
	ctx := context.Background()
	child := reconcile.RunRef{Kind: reconcile.KindRepo, ID: "child"}
	_, err := w.store.RunCreate(ctx, ports.RunRow{Ref: child, State: reconcile.RepoNeedsAttention, Body: []byte(`{}`), Repo: "acme/api"})
	require.NoError(t, err)
	ref := reconcile.RunRef{Kind: reconcile.KindRepo, ID: "task-1"}
	b, err := json.Marshal(reconcile.RepoRun{MaxRetries: 1})
	require.NoError(t, err)
	_, err = w.store.RunCreate(ctx, ports.RunRow{Ref: ref, State: reconcile.RepoQueued, Body: b, Repo: "acme/api",
		Settings: reconcile.Settings{AutoMerge: true}})
	require.NoError(t, err)
	ctl := &runs.Control{Store: w.store, Queue: w.q, Clock: ports.SystemClock}
	row, err := ctl.SetSubtask(ctx, ref, child.ID, true, "ann")
	require.NoError(t, err)
	require.Equal(t, []reconcile.Subtask{{ID: "child", Blocking: true}}, row.Subtasks)

	w.await(t, ref, reconcile.RepoPROpened, func(r ports.RunRow) bool {
		return r.PR.Checks == reconcile.ChecksPassing && r.PR.Review == reconcile.ReviewApproved
	})
	seen := logs.decisions(t, ref.ID)
	w.wake(t, ref) // a pass that surely reads the mergeable PR
	waitUntil(t, 10*time.Second, func() bool { return logs.decisions(t, ref.ID) > seen })
	row, err = w.store.RunGet(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, reconcile.RepoPROpened, row.State, "a pass saw the mergeable PR and held it for the subtask")
	pr, _ := fake.GetPR(1)
	require.False(t, pr.Merged)

	cr, err := w.store.RunGet(ctx, child)
	require.NoError(t, err)
	_, err = w.store.RunUpdate(ctx, ports.RunUpdateParams{Ref: child, ExpectedVersion: cr.Version, State: reconcile.RepoCompleted, Body: cr.Body})
	require.NoError(t, err)
	w.wake(t, ref) // what the child's own pass does when it completes (RunDependents)
	row = w.await(t, ref, reconcile.RepoCompleted)
	require.True(t, row.PR.Merged, "merged once a pass read the subtask completed")
}
