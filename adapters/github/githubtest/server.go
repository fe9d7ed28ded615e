// Package githubtest is a fake GitHub REST API for tests: the endpoints
// the github adapter uses (repository, pull requests, merge, reviews,
// check runs), served by httptest, recording every request. Every request
// it receives and every answer it sends is checked against GitHub's
// published REST API description (api.github.com.json, see NOTICE).
package githubtest

import (
	_ "embed"

	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"

	"github.com/reconcilerhq/reconciler/internal/contract"
)

// Definition is GitHub's published REST API description, trimmed to the
// operations the github code host and the github-actions agent call.
//
//go:embed api.github.com.json
var Definition []byte

// Request is one recorded request.
type Request struct {
	Method, Path, Query, Auth string
	Body                      map[string]any
}

// PR is a fake pull request.
type PR struct {
	Number         int
	Owner, Repo    string
	Title, Body    string
	Head, Base     string
	HeadSHA        string
	State          string // open or closed
	Merged         bool
	MergeMethod    string
	MergeableState string // clean, dirty, ...
}

// CheckRun is a fake check run.
type CheckRun struct{ Status, Conclusion string }

// Review is a fake review.
type Review struct {
	User, State, Body, CommitID string
}

// Server is the fake API.
type Server struct {
	*httptest.Server
	// Token is the bearer token every request must carry.
	Token string

	mu        sync.Mutex
	prs       map[int]*PR
	checks    map[string][]CheckRun
	statuses  map[string][]string // commit statuses' states by sha, oldest first
	reviews   map[int][]Review
	requests  []Request
	limitLeft int   // X-RateLimit-Remaining to answer with; -1: unlimited
	limitAt   int64 // X-RateLimit-Reset to answer with
	// Opened is called (outside the lock) after a pull request is opened.
	Opened func(pr PR)
}

// AnyRoute are the statuses GitHub answers on any route although its
// description lists them on few: bad credentials, a refusal or rate limit
// (403, 429), a missing resource, a validation failure, and server errors.
var AnyRoute = []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity,
	http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}

// New starts a fake accepting token; t fails when it ends if an exchange
// broke GitHub's definition.
func New(t contract.TB, token string) *Server {
	s := &Server{Token: token, prs: map[int]*PR{}, checks: map[string][]CheckRun{}, statuses: map[string][]string{}, reviews: map[int][]Review{}, limitLeft: -1}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/{owner}/{repo}", s.getRepo)
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls", s.listPRs)
	mux.HandleFunc("POST /repos/{owner}/{repo}/pulls", s.openPR)
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{n}", s.getPR)
	mux.HandleFunc("PUT /repos/{owner}/{repo}/pulls/{n}/merge", s.merge)
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{n}/reviews", s.listReviews)
	mux.HandleFunc("POST /repos/{owner}/{repo}/pulls/{n}/reviews", s.postReview)
	mux.HandleFunc("GET /repos/{owner}/{repo}/commits/{sha}/check-runs", s.listChecks)
	mux.HandleFunc("GET /repos/{owner}/{repo}/commits/{sha}/status", s.combinedStatus)
	c, err := contract.Parse("githubtest/api.github.com.json", Definition)
	if err != nil {
		panic(err) // the embedded definition is fixed
	}
	c.FillResponses().AllowStatus(AnyRoute...).FailOnViolations(t)
	s.Server = httptest.NewServer(c.Wrap(s.auth(mux)))
	return s
}

// auth records the request and refuses a wrong token.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization")}
		if len(b) > 0 {
			_ = json.Unmarshal(b, &rec.Body)
		}
		s.mu.Lock()
		s.requests = append(s.requests, rec)
		left, at := s.limitLeft, s.limitAt
		s.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		if left >= 0 {
			w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(left))
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(at, 10))
		}
		if rec.Auth != "Bearer "+s.Token {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// SetRateLimit makes every answer carry X-RateLimit-Remaining left and
// X-RateLimit-Reset at (unix seconds); left < 0 removes the headers.
func (s *Server) SetRateLimit(left int, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limitLeft, s.limitAt = left, at
}

// Requests returns the recorded requests.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// AddPR stores a pull request and returns its html URL.
func (s *Server) AddPR(pr PR) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pr.State == "" {
		pr.State = "open"
	}
	s.prs[pr.Number] = &pr
	return s.prURL(&pr)
}

// EditPR changes a stored pull request.
func (s *Server) EditPR(n int, edit func(pr *PR)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	edit(s.prs[n])
}

// GetPR returns a copy of a stored pull request.
func (s *Server) GetPR(n int) (PR, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr, ok := s.prs[n]
	if !ok {
		return PR{}, false
	}
	return *pr, true
}

// Count returns how many pull requests (any state) owner/repo holds with
// head branch head.
func (s *Server) Count(owner, repo, head string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, pr := range s.prs {
		if pr.Owner == owner && pr.Repo == repo && pr.Head == head {
			n++
		}
	}
	return n
}

// SetChecks sets the check runs of a commit.
func (s *Server) SetChecks(sha string, runs ...CheckRun) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks[sha] = runs
}

// SetStatuses sets the commit statuses of a commit (one state each:
// error, failure, pending or success; one context each).
func (s *Server) SetStatuses(sha string, states ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statuses[sha] = states
}

// AddReview adds a review to a pull request.
func (s *Server) AddReview(n int, rv Review) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reviews[n] = append(s.reviews[n], rv)
}

// Reviews returns a pull request's reviews.
func (s *Server) Reviews(n int) []Review {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Review(nil), s.reviews[n]...)
}

func (s *Server) prURL(pr *PR) string {
	return fmt.Sprintf("%s/%s/%s/pull/%d", s.URL, pr.Owner, pr.Repo, pr.Number)
}

func (s *Server) prJSON(pr *PR) map[string]any {
	ms := pr.MergeableState
	if ms == "" {
		ms = "clean"
	}
	return map[string]any{"number": pr.Number, "html_url": s.prURL(pr), "state": pr.State, "merged": pr.Merged,
		"mergeable": ms != "dirty", "mergeable_state": ms, "title": pr.Title, "body": pr.Body,
		"comments": 0, "review_comments": 0,
		"head": map[string]any{"sha": pr.HeadSHA, "ref": pr.Head}, "base": map[string]any{"ref": pr.Base}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// lookup returns the pull request of the path, or answers 404.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *PR {
	n, _ := strconv.Atoi(r.PathValue("n"))
	pr, ok := s.prs[n]
	if !ok || pr.Owner != r.PathValue("owner") || pr.Repo != r.PathValue("repo") {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return nil
	}
	return pr
}

func (s *Server) getRepo(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"default_branch": "main"})
}

func (s *Server) listPRs(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []map[string]any{}
	for n := 1; n <= len(s.prs); n++ {
		pr, ok := s.prs[n]
		if !ok || pr.Owner != r.PathValue("owner") || pr.Repo != r.PathValue("repo") {
			continue
		}
		if st := r.URL.Query().Get("state"); st != "" && st != "all" && st != pr.State {
			continue
		}
		if h := r.URL.Query().Get("head"); h != "" && h != pr.Owner+":"+pr.Head {
			continue
		}
		out = append(out, s.prJSON(pr))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) openPR(w http.ResponseWriter, r *http.Request) {
	var in struct{ Title, Head, Base, Body string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Head == "" || in.Base == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed"})
		return
	}
	s.mu.Lock()
	for _, pr := range s.prs {
		// As GitHub: one open pull request per head and base.
		if pr.State == "open" && pr.Owner == r.PathValue("owner") && pr.Repo == r.PathValue("repo") && pr.Head == in.Head && pr.Base == in.Base {
			s.mu.Unlock()
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
				"errors": []map[string]any{{"resource": "PullRequest", "code": "custom",
					"message": "A pull request already exists for " + pr.Owner + ":" + in.Head + "."}}})
			return
		}
	}
	pr := &PR{Number: len(s.prs) + 1, Owner: r.PathValue("owner"), Repo: r.PathValue("repo"), Title: in.Title, Body: in.Body,
		Head: in.Head, Base: in.Base, HeadSHA: fmt.Sprintf("%040d", len(s.prs)+1), State: "open"}
	s.prs[pr.Number] = pr
	out, opened := s.prJSON(pr), s.Opened
	cp := *pr
	s.mu.Unlock()
	if opened != nil {
		opened(cp)
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) getPR(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pr := s.lookup(w, r); pr != nil {
		writeJSON(w, http.StatusOK, s.prJSON(pr))
	}
}

func (s *Server) merge(w http.ResponseWriter, r *http.Request) {
	var in struct {
		SHA         string `json:"sha"`
		MergeMethod string `json:"merge_method"`
	}
	_ = json.NewDecoder(r.Body).Decode(&in)
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.lookup(w, r)
	switch {
	case pr == nil:
	case pr.Merged || pr.State != "open" || pr.MergeableState == "dirty":
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"message": "Pull Request is not mergeable"})
	case in.SHA != "" && in.SHA != pr.HeadSHA:
		writeJSON(w, http.StatusConflict, map[string]any{"message": "Head branch was modified"})
	default:
		pr.Merged, pr.State, pr.MergeMethod = true, "closed", in.MergeMethod
		writeJSON(w, http.StatusOK, map[string]any{"merged": true, "sha": pr.HeadSHA})
	}
}

func (s *Server) listReviews(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.lookup(w, r)
	if pr == nil {
		return
	}
	out := []map[string]any{}
	all := s.reviews[pr.Number]
	from, to := pageOf(r, len(all))
	for i, rv := range all[from:to] {
		out = append(out, map[string]any{"id": from + i + 1, "state": rv.State, "body": rv.Body, "user": map[string]any{"login": rv.User}, "commit_id": rv.CommitID})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) postReview(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Body     string `json:"body"`
		Event    string `json:"event"`
		CommitID string `json:"commit_id"`
	}
	_ = json.NewDecoder(r.Body).Decode(&in)
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.lookup(w, r)
	if pr == nil {
		return
	}
	state := map[string]string{"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}[in.Event]
	if state == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed"})
		return
	}
	s.reviews[pr.Number] = append(s.reviews[pr.Number], Review{User: "reconciler", State: state, Body: in.Body, CommitID: in.CommitID})
	writeJSON(w, http.StatusOK, map[string]any{"id": len(s.reviews[pr.Number]), "state": state})
}

// pageOf is the part of n items the request's page and per_page (GitHub's
// defaults: 1 and 30, at most 100) ask for, as [from, to).
func pageOf(r *http.Request, n int) (from, to int) {
	page, perPage := 1, 30
	if v, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil && v > 0 {
		page = v
	}
	if v, err := strconv.Atoi(r.URL.Query().Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	return min((page-1)*perPage, n), min(page*perPage, n)
}

// combinedStatus answers the combined status of a commit's statuses:
// failure if any failed or errored, else pending if any is pending, else
// success (pending when there are none), as GitHub documents it.
func (s *Server) combinedStatus(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sha := r.PathValue("sha")
	state, list := "success", []map[string]any{}
	if len(s.statuses[sha]) == 0 {
		state = "pending"
	}
	for i, st := range s.statuses[sha] {
		switch {
		case st == "failure" || st == "error":
			state = "failure"
		case st == "pending" && state != "failure":
			state = "pending"
		}
		list = append(list, map[string]any{"id": i + 1, "state": st, "context": fmt.Sprintf("ci/%d", i+1)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"state": state, "sha": sha, "total_count": len(list), "statuses": list})
}

func (s *Server) listChecks(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	runs := []map[string]any{}
	all := s.checks[r.PathValue("sha")]
	from, to := pageOf(r, len(all))
	for _, c := range all[from:to] {
		var conclusion any // null until the run completes, as GitHub answers
		if c.Conclusion != "" {
			conclusion = c.Conclusion
		}
		runs = append(runs, map[string]any{"status": c.Status, "conclusion": conclusion})
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(all), "check_runs": runs})
}
