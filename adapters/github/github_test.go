package github

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/github/githubtest"
	"github.com/reconcilerhq/reconciler/internal/netguard"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// secrets resolves env:GH to the fake's token.
type secrets map[string]string

func (s secrets) Resolve(_ context.Context, ref release.SecretRef) (string, error) {
	v, ok := s[ref.Ref]
	if !ok {
		return "", errors.New("unresolved " + ref.Ref)
	}
	return v, nil
}

type bundle struct {
	c      *Client
	fake   *githubtest.Server
	sleeps []time.Duration
}

func setup(t *testing.T, edit func(c *Config)) *bundle {
	t.Helper()
	fake := githubtest.New(t, "tok-123")
	t.Cleanup(fake.Close)
	cfg := Config{Guard: netguard.Loopback, BaseURL: fake.URL, Token: release.SecretRef{Ref: "env:GH"}, MergeMethod: "squash"}
	if edit != nil {
		edit(&cfg)
	}
	c, err := New(cfg, secrets{"env:GH": "tok-123"})
	require.NoError(t, err)
	b := &bundle{c: c, fake: fake}
	c.sleep = func(_ context.Context, d time.Duration) error { b.sleeps = append(b.sleeps, d); return nil }
	return b
}

func TestPRGetSummarisesStateChecksAndReviews(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	url := b.fake.AddPR(githubtest.PR{Number: 1, Owner: "acme", Repo: "api", Head: "feat", Base: "main", HeadSHA: "sha1"})
	b.fake.SetChecks("sha1", githubtest.CheckRun{Status: "completed", Conclusion: "success"}, githubtest.CheckRun{Status: "completed", Conclusion: "skipped"})
	b.fake.AddReview(1, githubtest.Review{User: "ann", State: "APPROVED"})
	pr, err := b.c.PRGet(context.Background(), url)
	require.NoError(t, err)
	require.Equal(t, reconcile.PullRequest{URL: url, Number: 1, State: reconcile.PROpen, Mergeable: true,
		Checks: reconcile.ChecksPassing, Review: reconcile.ReviewApproved, HeadSHA: "sha1"}, pr)
	var got []string
	for _, r := range b.fake.Requests() {
		require.Equal(t, "Bearer tok-123", r.Auth)
		got = append(got, r.Method+" "+r.Path)
	}
	require.Equal(t, []string{"GET /repos/acme/api/pulls/1", "GET /repos/acme/api/commits/sha1/check-runs", "GET /repos/acme/api/commits/sha1/status",
		"GET /repos/acme/api/pulls/1/reviews"}, got)
}

func TestPRGetChecksAndReviewRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		state    string
		checks   []githubtest.CheckRun
		reviews  []githubtest.Review
		want     func(pr *reconcile.PullRequest)
		statuses []string
	}{
		{"no check runs", "", nil, nil, func(pr *reconcile.PullRequest) { pr.Checks, pr.Review = reconcile.ChecksNone, reconcile.ReviewNone }, nil},
		{"an unfinished run is pending", "", []githubtest.CheckRun{{Status: "completed", Conclusion: "success"}, {Status: "in_progress"}}, nil,
			func(pr *reconcile.PullRequest) { pr.Checks = reconcile.ChecksPending }, nil},
		{"a failure beats a pending run", "", []githubtest.CheckRun{{Status: "in_progress"}, {Status: "completed", Conclusion: "timed_out"}}, nil,
			func(pr *reconcile.PullRequest) { pr.Checks = reconcile.ChecksFailing }, nil},
		{"conflicts beat checks", "dirty", []githubtest.CheckRun{{Status: "completed", Conclusion: "success"}}, nil,
			func(pr *reconcile.PullRequest) { pr.Checks, pr.Mergeable = reconcile.ChecksConflicts, false }, nil},
		{"a change request beats another's approval", "", nil,
			[]githubtest.Review{{User: "ann", State: "APPROVED"}, {User: "bob", State: "CHANGES_REQUESTED"}},
			func(pr *reconcile.PullRequest) { pr.Review = reconcile.ReviewChangesRequested }, nil},
		{"a reviewer's later approval replaces their change request", "", nil,
			[]githubtest.Review{{User: "bob", State: "CHANGES_REQUESTED"}, {User: "bob", State: "APPROVED"}},
			func(pr *reconcile.PullRequest) { pr.Review = reconcile.ReviewApproved }, nil},
		{"a comment does not undo an approval", "", nil,
			[]githubtest.Review{{User: "ann", State: "APPROVED"}, {User: "ann", State: "COMMENTED"}},
			func(pr *reconcile.PullRequest) { pr.Review = reconcile.ReviewApproved }, nil},
		{"comments only", "", nil, []githubtest.Review{{User: "ann", State: "COMMENTED"}},
			func(pr *reconcile.PullRequest) { pr.Review = reconcile.ReviewCommented }, nil},
		{"commit statuses alone pass", "", nil, nil, func(pr *reconcile.PullRequest) { pr.Checks = reconcile.ChecksPassing }, []string{"success"}},
		{"a failed commit status fails passing runs", "", []githubtest.CheckRun{{Status: "completed", Conclusion: "success"}}, nil,
			func(pr *reconcile.PullRequest) { pr.Checks = reconcile.ChecksFailing }, []string{"success", "error"}},
		{"a pending commit status holds passing runs", "", []githubtest.CheckRun{{Status: "completed", Conclusion: "success"}}, nil,
			func(pr *reconcile.PullRequest) { pr.Checks = reconcile.ChecksPending }, []string{"pending"}},
		{"the 101st check run is read", "", append(passing(100), githubtest.CheckRun{Status: "completed", Conclusion: "failure"}), nil,
			func(pr *reconcile.PullRequest) { pr.Checks = reconcile.ChecksFailing }, nil},
		{"the 101st review is read", "", nil, append(reviews(100, "ann", "COMMENTED"), githubtest.Review{User: "bob", State: "CHANGES_REQUESTED"}),
			func(pr *reconcile.PullRequest) { pr.Review = reconcile.ReviewChangesRequested }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			url := b.fake.AddPR(githubtest.PR{Number: 1, Owner: "o", Repo: "r", HeadSHA: "s", MergeableState: tc.state})
			b.fake.SetChecks("s", tc.checks...)
			b.fake.SetStatuses("s", tc.statuses...)
			for _, rv := range tc.reviews {
				b.fake.AddReview(1, rv)
			}
			pr, err := b.c.PRGet(context.Background(), url)
			require.NoError(t, err)
			want := reconcile.PullRequest{URL: url, Number: 1, State: reconcile.PROpen, Mergeable: true, HeadSHA: "s",
				Checks: reconcile.ChecksNone, Review: reconcile.ReviewNone}
			tc.want(&want)
			require.Equal(t, want, pr)
		})
	}
}

// passing is n successful check runs.
func passing(n int) []githubtest.CheckRun {
	out := make([]githubtest.CheckRun, n)
	for i := range out {
		out[i] = githubtest.CheckRun{Status: "completed", Conclusion: "success"}
	}
	return out
}

// reviews is n reviews of user in state.
func reviews(n int, user, state string) []githubtest.Review {
	out := make([]githubtest.Review, n)
	for i := range out {
		out[i] = githubtest.Review{User: user, State: state}
	}
	return out
}

func TestPROpenFromTheAgentsBranchOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	p := ports.PROpenParams{Repo: "acme/api", Head: "reconciler/task-1", Title: "Fix it", Body: "Done by the agent."}
	pr, err := b.c.PROpen(context.Background(), p)
	require.NoError(t, err)
	require.Equal(t, reconcile.PROpen, pr.State)
	require.Equal(t, 1, pr.Number)
	again, err := b.c.PROpen(context.Background(), p)
	require.NoError(t, err)
	require.Equal(t, pr, again, "the open pull request with that head is returned")
	var posts []githubtest.Request
	for _, r := range b.fake.Requests() {
		if r.Method == http.MethodPost {
			posts = append(posts, r)
		}
	}
	require.Len(t, posts, 1, "opened once")
	require.Equal(t, "/repos/acme/api/pulls", posts[0].Path)
	require.Equal(t, map[string]any{"title": "Fix it", "head": "reconciler/task-1", "base": "main", "body": "Done by the agent."}, posts[0].Body)
	require.Equal(t, "head=acme%3Areconciler%2Ftask-1&state=open", b.fake.Requests()[0].Query)
}

func TestPRMergeWithTheConfiguredMethodIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	url := b.fake.AddPR(githubtest.PR{Number: 1, Owner: "o", Repo: "r", HeadSHA: "s1"})
	require.NoError(t, b.c.PRMerge(context.Background(), ports.PRMergeParams{URL: url, HeadSHA: "s1", IdempotencyKey: "k"}))
	pr, _ := b.fake.GetPR(1)
	require.True(t, pr.Merged)
	require.Equal(t, "squash", pr.MergeMethod)
	req := b.fake.Requests()[0]
	require.Equal(t, "PUT /repos/o/r/pulls/1/merge", req.Method+" "+req.Path)
	require.Equal(t, map[string]any{"merge_method": "squash", "sha": "s1"}, req.Body)
	require.NoError(t, b.c.PRMerge(context.Background(), ports.PRMergeParams{URL: url, HeadSHA: "s1", IdempotencyKey: "k"}),
		"merging a merged pull request again is a success")

	url2 := b.fake.AddPR(githubtest.PR{Number: 2, Owner: "o", Repo: "r", HeadSHA: "new"})
	err := b.c.PRMerge(context.Background(), ports.PRMergeParams{URL: url2, HeadSHA: "old"})
	require.ErrorContains(t, err, "status 409")
}

func TestPRSubmitReviewOncePerKey(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	url := b.fake.AddPR(githubtest.PR{Number: 4, Owner: "o", Repo: "r", HeadSHA: "s"})
	p := ports.PRSubmitParams{Ref: reconcile.RunRef{Kind: reconcile.KindPRReview, ID: "rv"}, URL: url, IdempotencyKey: "rv:3:submitReview",
		HeadSHA: "s", Body: "Looks fine.", Event: "APPROVE"}
	require.NoError(t, b.c.PRSubmitReview(context.Background(), p))
	require.NoError(t, b.c.PRSubmitReview(context.Background(), p))
	reviews := b.fake.Reviews(4)
	require.Len(t, reviews, 1, "posted once")
	require.Equal(t, "APPROVED", reviews[0].State)
	require.Equal(t, "s", reviews[0].CommitID)
	require.Equal(t, "Looks fine.\n\n<!-- reconciler:rv:3:submitReview -->", reviews[0].Body)
	require.Error(t, b.c.PRSubmitReview(context.Background(), ports.PRSubmitParams{URL: url, IdempotencyKey: "x", Event: "LGTM"}))
}

func TestSpentRateLimitHoldsCalls(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.fake.AddPR(githubtest.PR{Number: 1, Owner: "o", Repo: "r"})
	now := time.Unix(1_800_000_000, 0)
	b.c.now = func() time.Time { return now }
	get := func() error {
		return b.c.do(context.Background(), "get", http.MethodGet, "/repos/o/r/pulls/1", nil, nil)
	}
	b.fake.SetRateLimit(0, now.Add(10*time.Second).Unix())
	require.NoError(t, get(), "the call that spent the limit still answers")
	b.fake.SetRateLimit(-1, 0)
	require.NoError(t, get())
	require.Equal(t, []time.Duration{10 * time.Second}, b.sleeps, "the next call waited for the reset")
	require.NoError(t, get())
	require.Len(t, b.sleeps, 1, "once reset, calls go straight on")

	b.fake.SetRateLimit(0, now.Add(time.Hour).Unix())
	require.NoError(t, get())
	n := len(b.fake.Requests())
	require.ErrorIs(t, get(), ErrRateLimited, "a reset beyond MaxWait fails at once")
	require.Len(t, b.fake.Requests(), n, "and sends nothing")
}

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			w.Header().Set("Retry-After", "3")
			http.Error(w, `{"message":"secondary rate limit"}`, http.StatusForbidden)
			return
		}
		_, _ = w.Write([]byte(`{"number":1,"state":"closed","merged":true,"head":{"sha":""}}`))
	}))
	t.Cleanup(srv.Close)
	b := setup(t, func(c *Config) { c.BaseURL = srv.URL })
	var pr apiPR
	require.NoError(t, b.c.do(context.Background(), "get", http.MethodGet, "/x", nil, &pr))
	require.True(t, pr.Merged)
	require.Equal(t, []time.Duration{3 * time.Second}, b.sleeps)
	require.Equal(t, 2, calls)
}

func TestTokenComesFromTheResolverAndNeverFromErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	url := b.fake.AddPR(githubtest.PR{Number: 1, Owner: "o", Repo: "r"})
	b.fake.Token = "another"
	_, err := b.c.PRGet(context.Background(), url)
	require.ErrorContains(t, err, "status 401: Bad credentials")
	require.NotContains(t, err.Error(), "tok-123")

	c, err := New(Config{Guard: netguard.Loopback, BaseURL: b.fake.URL, Token: release.SecretRef{Ref: "env:MISSING"}}, secrets{})
	require.NoError(t, err)
	n := len(b.fake.Requests())
	_, err = c.PRGet(context.Background(), url)
	require.ErrorContains(t, err, "token: unresolved env:MISSING")
	require.Len(t, b.fake.Requests(), n, "nothing sent without a token")
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	_, err := New(Config{Token: release.SecretRef{Ref: "env:GH"}, MergeMethod: "octopus"}, secrets{})
	require.ErrorContains(t, err, `merge method "octopus"`)
	_, err = New(Config{}, secrets{})
	require.ErrorContains(t, err, "token reference is empty")
	_, err = parsePRURL("https://github.com/o/r/issues/1")
	require.ErrorContains(t, err, "OWNER/REPO/pull/NUMBER")
}

func TestWebhookWakesThePullRequestsOfSignedDeliveries(t *testing.T) {
	t.Parallel()
	secret := []byte("hook-secret")
	var got []PREvent
	h := Webhook{Secret: secret, OnPR: func(_ context.Context, e PREvent) { got = append(got, e) }}
	send := func(event, body, sig string) int {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/github", strings.NewReader(body))
		req.Header.Set("X-GitHub-Event", event)
		if sig != "" {
			req.Header.Set("X-Hub-Signature-256", sig)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	repo := `"repository":{"full_name":"o/r","html_url":"https://github.com/o/r"}`
	pr := `{"action":"synchronize","pull_request":{"number":7,"html_url":"https://github.com/o/r/pull/7"},` + repo + `}`
	require.Equal(t, http.StatusNoContent, send("pull_request", pr, Sign(secret, []byte(pr))))
	review := `{"action":"submitted","pull_request":{"number":8},` + repo + `}`
	require.Equal(t, http.StatusNoContent, send("pull_request_review", review, Sign(secret, []byte(review))))
	suite := `{"action":"completed","check_suite":{"pull_requests":[{"number":7},{"number":9}]},` + repo + `}`
	require.Equal(t, http.StatusNoContent, send("check_suite", suite, Sign(secret, []byte(suite))))
	run := `{"action":"completed","check_run":{"pull_requests":[{"number":3}]},` + repo + `}`
	require.Equal(t, http.StatusNoContent, send("check_run", run, Sign(secret, []byte(run))))
	require.Equal(t, http.StatusNoContent, send("ping", `{"zen":"hi"}`, Sign(secret, []byte(`{"zen":"hi"}`))))
	require.Equal(t, []PREvent{
		{Event: "pull_request", Repo: "o/r", Number: 7, URL: "https://github.com/o/r/pull/7"},
		{Event: "pull_request_review", Repo: "o/r", Number: 8, URL: "https://github.com/o/r/pull/8"},
		{Event: "check_suite", Repo: "o/r", Number: 7, URL: "https://github.com/o/r/pull/7"},
		{Event: "check_suite", Repo: "o/r", Number: 9, URL: "https://github.com/o/r/pull/9"},
		{Event: "check_run", Repo: "o/r", Number: 3, URL: "https://github.com/o/r/pull/3"},
	}, got)

	got = nil
	require.Equal(t, http.StatusUnauthorized, send("pull_request", pr, ""), "unsigned")
	require.Equal(t, http.StatusUnauthorized, send("pull_request", pr, Sign([]byte("other"), []byte(pr))), "wrong secret")
	require.Equal(t, http.StatusUnauthorized, send("pull_request", pr+" ", Sign(secret, []byte(pr))), "body changed")
	require.Equal(t, http.StatusBadRequest, send("pull_request", "{", Sign(secret, []byte("{"))))
	big := bytes.Repeat([]byte("a"), maxDelivery+1)
	require.Equal(t, http.StatusRequestEntityTooLarge, send("pull_request", string(big), Sign(secret, big)))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	require.Empty(t, got, "refused deliveries wake nothing")
}

// GitHub's default content type is a form whose payload field holds the
// JSON, signed over the raw form body (issue 31, defect 7).
func TestWebhookTakesAFormDeliveryLikeAJSONOne(t *testing.T) {
	t.Parallel()
	secret := []byte("hook-secret")
	var got []PREvent
	h := Webhook{Secret: secret, OnPR: func(_ context.Context, e PREvent) { got = append(got, e) }}
	send := func(contentType string, body []byte, sig string) int {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("X-GitHub-Event", "pull_request")
		req.Header.Set("X-Hub-Signature-256", sig)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	pr := `{"action":"synchronize","pull_request":{"number":7,"html_url":"https://github.com/o/r/pull/7"},"repository":{"full_name":"o/r"}}`
	form := []byte("payload=" + url.QueryEscape(pr))
	require.Equal(t, http.StatusUnauthorized, send("application/x-www-form-urlencoded", form, Sign(secret, []byte(pr))),
		"the signature is over the raw form body")
	require.Equal(t, http.StatusBadRequest, send("application/x-www-form-urlencoded", []byte("x=1"), Sign(secret, []byte("x=1"))))
	require.Empty(t, got)
	require.Equal(t, http.StatusNoContent, send("application/x-www-form-urlencoded", form, Sign(secret, form)))
	require.Equal(t, http.StatusNoContent, send("application/json", []byte(pr), Sign(secret, []byte(pr))))
	want := PREvent{Event: "pull_request", Repo: "o/r", Number: 7, URL: "https://github.com/o/r/pull/7"}
	require.Equal(t, []PREvent{want, want}, got)
}
