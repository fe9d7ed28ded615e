package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// prsByURL is a ports.PullRequests answering from a map and counting reads.
type prsByURL struct {
	prs   map[string]reconcile.PullRequest
	reads map[string]int
}

func (p *prsByURL) PRGet(_ context.Context, url string) (reconcile.PullRequest, error) {
	p.reads[url]++
	pr, ok := p.prs[url]
	if !ok {
		return pr, errors.New("no such pull request")
	}
	return pr, nil
}

func (p *prsByURL) PROpen(context.Context, ports.PROpenParams) (reconcile.PullRequest, error) {
	return reconcile.PullRequest{}, errors.New("not used")
}

func TestPRPollerObservesFollowingRunsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, q := memory.NewRunStore(ports.SystemClock), memory.NewQueue(ports.SystemClock)
	prs := &prsByURL{prs: map[string]reconcile.PullRequest{
		"u/1": {URL: "u/1", Number: 1, State: reconcile.PROpen, Checks: reconcile.ChecksFailing},
		"u/2": {URL: "u/2", Number: 2, State: reconcile.PROpen},
	}, reads: map[string]int{}}
	create := func(kind reconcile.RunKind, id string, st reconcile.State, body any) reconcile.RunRef {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		ref := reconcile.RunRef{Kind: kind, ID: id}
		_, err = store.RunCreate(ctx, ports.RunRow{Ref: ref, State: st, Body: b})
		require.NoError(t, err)
		return ref
	}
	repo := create(reconcile.KindRepo, "r1", reconcile.RepoPROpened, reconcile.RepoRun{PR: reconcile.PRFields{URL: "u/1"}})
	review := create(reconcile.KindPRReview, "v1", reconcile.ReviewQueued, reconcile.PRReviewRun{PRURL: "u/2"})
	queued := create(reconcile.KindRepo, "r2", reconcile.RepoQueued, reconcile.RepoRun{PR: reconcile.PRFields{URL: "u/1"}})
	done := create(reconcile.KindRepo, "r3", reconcile.RepoCompleted, reconcile.RepoRun{PR: reconcile.PRFields{URL: "u/1"}})
	p := &runs.PRPoller{Store: store, Queue: q, PRs: prs, Clock: ports.SystemClock, Logger: quietLogger()}

	n, err := p.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the repo run in pr_opened and the queued review follow a PR")
	for _, ref := range []reconcile.RunRef{repo, review} {
		row, err := store.RunGet(ctx, ref)
		require.NoError(t, err)
		require.NotNil(t, row.PR, "%s observed", ref)
		_, err = q.WorkGet(ctx, runs.Key(ref))
		require.NoError(t, err, "%s woken", ref)
	}
	for _, ref := range []reconcile.RunRef{queued, done} {
		row, err := store.RunGet(ctx, ref)
		require.NoError(t, err)
		require.Nil(t, row.PR, "%s follows no PR in its state", ref)
	}
	n, err = p.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "an unchanged PR is not written again")

	prs.prs["u/1"] = reconcile.PullRequest{URL: "u/1", Number: 1, State: reconcile.PRMerged, Merged: true}
	n, err = p.Refresh(ctx, "u/2")
	require.NoError(t, err)
	require.Zero(t, n, "a refresh reads only the runs of its PR")
	n, err = p.Refresh(ctx, "u/1")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	row, err := store.RunGet(ctx, repo)
	require.NoError(t, err)
	require.True(t, row.PR.Merged)
}
