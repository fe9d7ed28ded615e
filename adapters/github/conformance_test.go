package github

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/github/githubtest"
	"github.com/reconcilerhq/reconciler/internal/netguard"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestCodeHostConformance runs the CodeHost suite against the client
// talking to the fake GitHub API. What the host did is read back from the
// fake: a pull request is merged at most once there (as on GitHub), and
// each posted review is stored on its pull request.
func TestCodeHostConformance(t *testing.T) {
	t.Parallel()
	porttest.CodeHost(t, func(t *testing.T) porttest.CodeHostFixture {
		fake := githubtest.New("tok-suite")
		t.Cleanup(fake.Close)
		c, err := New(Config{Guard: netguard.Loopback, BaseURL: fake.URL, Token: release.SecretRef{Ref: "env:GH"}}, secrets{"env:GH": "tok-suite"})
		require.NoError(t, err)
		var mu sync.Mutex
		opened := 0
		number := func(url string) int {
			r, err := parsePRURL(url)
			require.NoError(t, err)
			return r.number
		}
		return porttest.CodeHostFixture{
			Host: c,
			OpenPR: func(*testing.T) (string, string) {
				mu.Lock()
				defer mu.Unlock()
				opened++
				head := fmt.Sprintf("%040x", opened)
				return fake.AddPR(githubtest.PR{Number: opened, Owner: "acme", Repo: "api", Head: fmt.Sprintf("feat-%d", opened),
					Base: "main", HeadSHA: head}), head
			},
			Merged: func(url string) int {
				pr, ok := fake.GetPR(number(url))
				require.True(t, ok, "no pull request %s", url)
				if pr.Merged {
					return 1
				}
				return 0
			},
			Submitted: func(url string) int { return len(fake.Reviews(number(url))) },
		}
	})
}

// TestPullRequestsConformance runs the PullRequests suite against the
// client talking to the fake GitHub API, which, as GitHub, refuses a second
// open pull request for one head and base (422).
func TestPullRequestsConformance(t *testing.T) {
	t.Parallel()
	porttest.PullRequests(t, func(t *testing.T) porttest.PullRequestsFixture {
		fake := githubtest.New("tok-suite")
		t.Cleanup(fake.Close)
		c, err := New(Config{Guard: netguard.Loopback, BaseURL: fake.URL, Token: release.SecretRef{Ref: "env:GH"}}, secrets{"env:GH": "tok-suite"})
		require.NoError(t, err)
		edit := func(t *testing.T, url string, fn func(pr *githubtest.PR)) {
			r, err := parsePRURL(url)
			require.NoError(t, err)
			_, ok := fake.GetPR(r.number)
			require.True(t, ok, "no pull request %s", url)
			fake.EditPR(r.number, fn)
		}
		return porttest.PullRequestsFixture{
			PRs:  c,
			Repo: "acme/api",
			Count: func(repo, head string) int {
				owner, name, err := splitRepo(repo)
				require.NoError(t, err)
				return fake.Count(owner, name, head)
			},
			MergeOnHost: func(t *testing.T, url string) {
				edit(t, url, func(pr *githubtest.PR) { pr.Merged, pr.State = true, "closed" })
			},
			CloseOnHost: func(t *testing.T, url string) { edit(t, url, func(pr *githubtest.PR) { pr.State = "closed" }) },
			MissingURL:  fake.URL + "/acme/api/pull/999",
		}
	})
}
