package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// prRef is a pull request's repository and number.
type prRef struct {
	owner, repo string
	number      int
}

// path is the pull request's API path.
func (r prRef) path() string {
	return fmt.Sprintf("/repos/%s/%s/pulls/%d", url.PathEscape(r.owner), url.PathEscape(r.repo), r.number)
}

// parsePRURL reads owner, repository and number from a pull request URL
// ending in /<owner>/<repo>/pull/<number> (html_url, any host).
func parsePRURL(u string) (prRef, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return prRef{}, fmt.Errorf("github: pull request URL %q: %w", u, err)
	}
	parts := strings.Split(strings.Trim(pu.Path, "/"), "/")
	if len(parts) >= 4 && parts[len(parts)-2] == "pull" {
		n, err := strconv.Atoi(parts[len(parts)-1])
		if err == nil && n > 0 {
			return prRef{owner: parts[len(parts)-4], repo: parts[len(parts)-3], number: n}, nil
		}
	}
	return prRef{}, fmt.Errorf("github: pull request URL %q: want .../OWNER/REPO/pull/NUMBER", u)
}

// splitRepo splits owner/name.
func splitRepo(repo string) (string, string, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("github: repository %q: want OWNER/NAME", repo)
	}
	return owner, name, nil
}

// apiPR is the part of a pull request the client reads.
type apiPR struct {
	Number         int    `json:"number"`
	HTMLURL        string `json:"html_url"`
	State          string `json:"state"`
	Merged         bool   `json:"merged"`
	Mergeable      *bool  `json:"mergeable"`
	MergeableState string `json:"mergeable_state"`
	Comments       int    `json:"comments"`
	ReviewComments int    `json:"review_comments"`
	Head           struct {
		SHA string `json:"sha"`
		Ref string `json:"ref"`
	} `json:"head"`
}

// PRGet reads the pull request, its check runs at the head and its
// reviews, and summarises them as the kernel observes a pull request:
// conflicts (mergeable_state dirty) win over checks; a failed, cancelled,
// timed-out or action-required check run is failing, an unfinished one
// pending, all finished otherwise passing; the latest review of each
// reviewer decides (changes requested, else approved, else commented).
func (c *Client) PRGet(ctx context.Context, u string) (reconcile.PullRequest, error) {
	r, err := parsePRURL(u)
	if err != nil {
		return reconcile.PullRequest{}, err
	}
	var pr apiPR
	if err := c.do(ctx, "get pull request", http.MethodGet, r.path(), nil, &pr); err != nil {
		return reconcile.PullRequest{}, err
	}
	out := reconcile.PullRequest{URL: pr.HTMLURL, Number: pr.Number, Merged: pr.Merged, HeadSHA: pr.Head.SHA,
		Mergeable: pr.Mergeable != nil && *pr.Mergeable, Comments: pr.Comments + pr.ReviewComments}
	switch {
	case pr.Merged:
		out.State = reconcile.PRMerged
	case pr.State == "open":
		out.State = reconcile.PROpen
	default:
		out.State = reconcile.PRClosed
	}
	if out.URL == "" {
		out.URL = u
	}
	if out.Checks, err = c.checks(ctx, r, pr.Head.SHA); err != nil {
		return reconcile.PullRequest{}, err
	}
	if pr.MergeableState == "dirty" {
		out.Checks = reconcile.ChecksConflicts
	}
	if out.Review, err = c.reviews(ctx, r); err != nil {
		return reconcile.PullRequest{}, err
	}
	return out, nil
}

// maxPages bounds the pages read of one list (100 items each).
const maxPages = 10

// checks summarises the head commit's check runs (every page, up to
// maxPages) and its commit statuses (the combined status): failing when
// any fails, pending when any is not done, passing when some passed, none
// when it has neither.
func (c *Client) checks(ctx context.Context, r prRef, sha string) (reconcile.ChecksStatus, error) {
	if sha == "" {
		return reconcile.ChecksNone, nil
	}
	commit := fmt.Sprintf("/repos/%s/%s/commits/%s", url.PathEscape(r.owner), url.PathEscape(r.repo), url.PathEscape(sha))
	st := reconcile.ChecksNone
	pending := false
	for page, seen := 1, 0; page <= maxPages; page++ {
		var res struct {
			TotalCount int `json:"total_count"`
			CheckRuns  []struct {
				Status     string `json:"status"`
				Conclusion string `json:"conclusion"`
			} `json:"check_runs"`
		}
		if err := c.do(ctx, "list check runs", http.MethodGet, fmt.Sprintf("%s/check-runs?per_page=100&page=%d", commit, page), nil, &res); err != nil {
			return "", err
		}
		for _, cr := range res.CheckRuns {
			switch {
			case cr.Status != "completed":
				pending = true
			case cr.Conclusion == "failure" || cr.Conclusion == "cancelled" || cr.Conclusion == "timed_out" || cr.Conclusion == "action_required" || cr.Conclusion == "startup_failure":
				return reconcile.ChecksFailing, nil
			default:
				st = reconcile.ChecksPassing
			}
		}
		seen += len(res.CheckRuns)
		if len(res.CheckRuns) < 100 || seen >= res.TotalCount {
			break
		}
		if page == maxPages {
			pending = true // more runs than we read: not known to pass
		}
	}
	var combined struct {
		State      string `json:"state"`
		TotalCount int    `json:"total_count"`
	}
	if err := c.do(ctx, "get combined status", http.MethodGet, commit+"/status", nil, &combined); err != nil {
		return "", err
	}
	if combined.TotalCount > 0 {
		switch combined.State {
		case "failure", "error":
			return reconcile.ChecksFailing, nil
		case "success":
			st = reconcile.ChecksPassing
		default:
			pending = true
		}
	}
	if pending {
		return reconcile.ChecksPending, nil
	}
	return st, nil
}

// apiReview is one review.
type apiReview struct {
	ID    int64  `json:"id"`
	State string `json:"state"`
	Body  string `json:"body"`
	User  struct {
		Login string `json:"login"`
	} `json:"user"`
}

// listReviews lists the pull request's reviews, oldest first: every
// page, up to maxPages.
func (c *Client) listReviews(ctx context.Context, r prRef) ([]apiReview, error) {
	var all []apiReview
	for page := 1; page <= maxPages; page++ {
		var res []apiReview
		if err := c.do(ctx, "list reviews", http.MethodGet, fmt.Sprintf("%s/reviews?per_page=100&page=%d", r.path(), page), nil, &res); err != nil {
			return nil, err
		}
		all = append(all, res...)
		if len(res) < 100 {
			break
		}
	}
	return all, nil
}

// reviews summarises the latest review of each reviewer.
func (c *Client) reviews(ctx context.Context, r prRef) (reconcile.ReviewStatus, error) {
	list, err := c.listReviews(ctx, r)
	if err != nil {
		return "", err
	}
	latest := map[string]string{}
	for _, rv := range list {
		if rv.State == "PENDING" {
			continue
		}
		if rv.State == "COMMENTED" && latest[rv.User.Login] != "" {
			continue // a comment does not undo an approval or a change request
		}
		latest[rv.User.Login] = rv.State
	}
	st := reconcile.ReviewNone
	for _, s := range latest {
		switch {
		case s == "CHANGES_REQUESTED":
			return reconcile.ReviewChangesRequested, nil
		case s == "APPROVED":
			st = reconcile.ReviewApproved
		case s == "COMMENTED" && st == reconcile.ReviewNone:
			st = reconcile.ReviewCommented
		}
	}
	return st, nil
}

// PROpen opens a pull request from p.Head into p.Base (or the repository's
// default branch), or returns the open one with that head.
func (c *Client) PROpen(ctx context.Context, p ports.PROpenParams) (reconcile.PullRequest, error) {
	owner, name, err := splitRepo(p.Repo)
	if err != nil {
		return reconcile.PullRequest{}, err
	}
	if p.Head == "" {
		return reconcile.PullRequest{}, errors.New("github: open pull request: head branch is empty")
	}
	repoPath := fmt.Sprintf("/repos/%s/%s", url.PathEscape(owner), url.PathEscape(name))
	var open []apiPR
	q := url.Values{"state": {"open"}, "head": {owner + ":" + p.Head}}
	if err := c.do(ctx, "find pull request", http.MethodGet, repoPath+"/pulls?"+q.Encode(), nil, &open); err != nil {
		return reconcile.PullRequest{}, err
	}
	if len(open) == 0 {
		base := p.Base
		if base == "" {
			var repo struct {
				DefaultBranch string `json:"default_branch"`
			}
			if err := c.do(ctx, "get repository", http.MethodGet, repoPath, nil, &repo); err != nil {
				return reconcile.PullRequest{}, err
			}
			base = repo.DefaultBranch
		}
		var pr apiPR
		in := map[string]string{"title": p.Title, "head": p.Head, "base": base, "body": p.Body}
		err := c.do(ctx, "open pull request", http.MethodPost, repoPath+"/pulls", in, &pr)
		var apiErr *apiError
		if errors.As(err, &apiErr) && apiErr.status == http.StatusUnprocessableEntity {
			// Another caller opened it between our lookup and our open
			// (GitHub allows one open pull request per head): take that one.
			if ferr := c.do(ctx, "find pull request", http.MethodGet, repoPath+"/pulls?"+q.Encode(), nil, &open); ferr != nil {
				return reconcile.PullRequest{}, ferr
			}
			if len(open) == 0 {
				return reconcile.PullRequest{}, err
			}
		} else if err != nil {
			return reconcile.PullRequest{}, err
		} else {
			open = append(open, pr)
		}
	}
	return c.PRGet(ctx, open[0].HTMLURL)
}

// PRMerge merges the pull request with the configured method, pinned to
// HeadSHA. A pull request already merged is a success.
func (c *Client) PRMerge(ctx context.Context, p ports.PRMergeParams) error {
	r, err := parsePRURL(p.URL)
	if err != nil {
		return err
	}
	in := map[string]string{"merge_method": c.cfg.MergeMethod}
	if p.HeadSHA != "" {
		in["sha"] = p.HeadSHA
	}
	err = c.do(ctx, "merge pull request", http.MethodPut, r.path()+"/merge", in, nil)
	if st := statusOf(err); st == http.StatusMethodNotAllowed || st == http.StatusConflict {
		var pr apiPR
		if gerr := c.do(ctx, "get pull request", http.MethodGet, r.path(), nil, &pr); gerr == nil && pr.Merged {
			return nil // merged before (a retried merge)
		}
	}
	return err
}

// reviewMarker tags a posted review with its idempotency key.
func reviewMarker(key string) string { return "<!-- reconciler:" + key + " -->" }

// PRSubmitReview posts the review (event COMMENT unless p.Event says
// otherwise) on p.HeadSHA, unless a review carrying the same idempotency
// key was posted before. Concurrent submissions of one key through this
// client run one after the other, so only the first posts.
func (c *Client) PRSubmitReview(ctx context.Context, p ports.PRSubmitParams) error {
	r, err := parsePRURL(p.URL)
	if err != nil {
		return err
	}
	defer c.lockKey(p.IdempotencyKey)()
	marker := reviewMarker(p.IdempotencyKey)
	list, err := c.listReviews(ctx, r)
	if err != nil {
		return err
	}
	for _, rv := range list {
		if strings.Contains(rv.Body, marker) {
			return nil
		}
	}
	event := p.Event
	switch event {
	case "":
		event = "COMMENT"
	case "COMMENT", "APPROVE", "REQUEST_CHANGES":
	default:
		return fmt.Errorf("github: review event %q: want COMMENT, APPROVE or REQUEST_CHANGES", event)
	}
	body := p.Body
	if body == "" {
		body = "Review by reconciler run " + p.Ref.String() + "."
	}
	in := map[string]string{"body": body + "\n\n" + marker, "event": event}
	if p.HeadSHA != "" {
		in["commit_id"] = p.HeadSHA
	}
	return c.do(ctx, "post review", http.MethodPost, r.path()+"/reviews", in, nil)
}
