package porttest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// PullRequestsFixture is one ports.PullRequests under test and what the
// suite can do and see on its host, out of band.
type PullRequestsFixture struct {
	PRs ports.PullRequests
	// Repo is an owner/name the host knows.
	Repo string
	// Count returns how many pull requests (open or not) the host holds
	// for repo with head branch head.
	Count func(repo, head string) int
	// MergeOnHost merges url on the host, as a person would, and
	// CloseOnHost closes it unmerged.
	MergeOnHost, CloseOnHost func(t *testing.T, url string)
	// MissingURL is the URL of a pull request the host does not have.
	MissingURL string
}

// PullRequests is the conformance suite of ports.PullRequests. newPRs is
// called once per subtest; subtests run in parallel.
//
// It checks the port's contract: PROpen opens one pull request per head
// branch and returns the open one on a retry, sequentially and under
// concurrent calls (run it with -race); a head whose pull request was
// closed gets a new one; different heads get different pull requests;
// PRGet reads what the host holds now (open, merged, closed) and a pull
// request the host does not have is ports.ErrNotFound; an empty head is
// refused and opens nothing.
func PullRequests(t *testing.T, newPRs func(t *testing.T) PullRequestsFixture) {
	open := func(t *testing.T, f PullRequestsFixture, head string) reconcile.PullRequest {
		t.Helper()
		pr, err := f.PRs.PROpen(t.Context(), ports.PROpenParams{Repo: f.Repo, Head: head, Title: "suite: " + head, Body: "opened by the suite"})
		require.NoError(t, err)
		return pr
	}
	t.Run("OpenReturnsAnOpenPullRequest", func(t *testing.T) {
		t.Parallel()
		f := newPRs(t)
		pr := open(t, f, "agent/open")
		require.NotEmpty(t, pr.URL)
		require.Positive(t, pr.Number)
		require.Equal(t, reconcile.PROpen, pr.State)
		require.False(t, pr.Merged)
		require.NotEmpty(t, pr.HeadSHA)
		got, err := f.PRs.PRGet(t.Context(), pr.URL)
		require.NoError(t, err)
		require.Equal(t, pr, got, "PRGet reads what PROpen returned")
	})
	t.Run("OpenIsIdempotentByHead", func(t *testing.T) {
		t.Parallel()
		f := newPRs(t)
		first := open(t, f, "agent/retry")
		again := open(t, f, "agent/retry")
		require.Equal(t, first.URL, again.URL, "a retried open returns the open pull request")
		require.Equal(t, 1, f.Count(f.Repo, "agent/retry"))
	})
	t.Run("ConcurrentOpensOpenOne", func(t *testing.T) {
		t.Parallel()
		f := newPRs(t)
		urls := make(chan string, 8)
		requireConcurrentOK(t, 8, func() error {
			pr, err := f.PRs.PROpen(t.Context(), ports.PROpenParams{Repo: f.Repo, Head: "agent/race", Title: "race"})
			if err == nil {
				urls <- pr.URL
			}
			return err
		})
		close(urls)
		seen := map[string]bool{}
		for u := range urls {
			seen[u] = true
		}
		require.Len(t, seen, 1, "every concurrent open returns the same pull request")
		require.Equal(t, 1, f.Count(f.Repo, "agent/race"), "the host holds one pull request for the head")
	})
	t.Run("DifferentHeadsGetDifferentPullRequests", func(t *testing.T) {
		t.Parallel()
		f := newPRs(t)
		a, b := open(t, f, "agent/a"), open(t, f, "agent/b")
		require.NotEqual(t, a.URL, b.URL)
		require.NotEqual(t, a.Number, b.Number)
	})
	t.Run("GetReadsTheHostNow", func(t *testing.T) {
		t.Parallel()
		f := newPRs(t)
		merged, closed := open(t, f, "agent/merged"), open(t, f, "agent/closed")
		f.MergeOnHost(t, merged.URL)
		f.CloseOnHost(t, closed.URL)
		got, err := f.PRs.PRGet(t.Context(), merged.URL)
		require.NoError(t, err)
		require.Equal(t, reconcile.PRMerged, got.State)
		require.True(t, got.Merged)
		got, err = f.PRs.PRGet(t.Context(), closed.URL)
		require.NoError(t, err)
		require.Equal(t, reconcile.PRClosed, got.State)
		require.False(t, got.Merged)
	})
	t.Run("ClosedHeadGetsANewPullRequest", func(t *testing.T) {
		t.Parallel()
		f := newPRs(t)
		old := open(t, f, "agent/reopen")
		f.CloseOnHost(t, old.URL)
		fresh := open(t, f, "agent/reopen")
		require.NotEqual(t, old.URL, fresh.URL, "a closed pull request is not returned as the open one")
		require.Equal(t, reconcile.PROpen, fresh.State)
		require.Equal(t, 2, f.Count(f.Repo, "agent/reopen"))
	})
	t.Run("MissingIsNotFound", func(t *testing.T) {
		t.Parallel()
		f := newPRs(t)
		_, err := f.PRs.PRGet(t.Context(), f.MissingURL)
		require.True(t, errors.Is(err, ports.ErrNotFound), "got %v", err)
	})
	t.Run("EmptyHeadIsRefused", func(t *testing.T) {
		t.Parallel()
		f := newPRs(t)
		_, err := f.PRs.PROpen(t.Context(), ports.PROpenParams{Repo: f.Repo, Title: "no head"})
		require.Error(t, err)
		require.Zero(t, f.Count(f.Repo, ""), "a refused open opens nothing")
	})
}
