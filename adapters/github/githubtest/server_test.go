package githubtest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/github/githubtest"
	"github.com/reconcilerhq/reconciler/internal/contract"
)

// calledOperations are the operations the github code host and the
// github-actions agent call: the trimmed definition must hold each.
var calledOperations = []string{
	"GET /repos/{owner}/{repo}",
	"GET /repos/{owner}/{repo}/pulls",
	"POST /repos/{owner}/{repo}/pulls",
	"GET /repos/{owner}/{repo}/pulls/{pull_number}",
	"PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge",
	"GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews",
	"POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews",
	"GET /repos/{owner}/{repo}/commits/{ref}/check-runs",
	"GET /repos/{owner}/{repo}/commits/{ref}/status",
	"GET /repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs",
	"POST /repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches",
	"GET /repos/{owner}/{repo}/actions/runs/{run_id}",
	"POST /repos/{owner}/{repo}/actions/runs/{run_id}/cancel",
}

// TestDefinitionHasTheOperationsWeCall: the committed description is
// GitHub's (an OpenAPI 3 document of api.github.com) and holds every
// operation we call, and nothing else.
func TestDefinitionHasTheOperationsWeCall(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Servers []struct{ URL string }                `json:"servers"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(githubtest.Definition, &doc))
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3."))
	require.Equal(t, "https://api.github.com", doc.Servers[0].URL)
	var have []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method != "parameters" {
				have = append(have, strings.ToUpper(method)+" "+path)
			}
		}
	}
	require.ElementsMatch(t, calledOperations, have)
}

// recorder is a contract.TB that keeps what the checker reports.
type recorder struct {
	mu     sync.Mutex
	errs   []string
	checks []func()
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Cleanup(f func()) { r.checks = append(r.checks, f) }

// reported runs the checker's end-of-test check and returns its reports.
func (r *recorder) reported() []string {
	for _, f := range r.checks {
		f()
	}
	return r.errs
}

// TestOffDefinitionRequestFails: a request GitHub's description refuses
// (a pull request opened without head, a merge_method GitHub lacks) is
// reported, so the fake cannot agree with an adapter that sends it.
func TestOffDefinitionRequestFails(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	fake := githubtest.New(rec, "tok")
	defer fake.Close()
	send := func(method, path, body string) {
		req, err := http.NewRequest(method, fake.URL+path, bytes.NewBufferString(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
	}
	send(http.MethodPost, "/repos/o/r/pulls", `{"title":"t","base":"main"}`)
	send(http.MethodPut, "/repos/o/r/pulls/1/merge", `{"merge_method":"fast-forward"}`)
	got := rec.reported()
	require.Len(t, got, 2, "%q", got)
	require.Contains(t, got[0], "POST /repos/o/r/pulls")
	require.Contains(t, got[0], "head")
	require.Contains(t, got[1], "merge_method")
}

// TestOffDefinitionAnswerFails: an answer outside GitHub's description (a
// pull request number as a string) is reported, filled or not, while
// the fields a fake leaves out are completed to the description's shape.
func TestOffDefinitionAnswerFails(t *testing.T) {
	t.Parallel()
	c, err := contract.Parse("api.github.com.json", githubtest.Definition)
	require.NoError(t, err)
	c.FillResponses()
	var answer string
	srv := httptest.NewServer(c.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answer))
	})))
	defer srv.Close()
	get := func() map[string]any {
		res, err := http.Get(srv.URL + "/repos/o/r/pulls/1")
		require.NoError(t, err)
		defer res.Body.Close()
		var v map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&v))
		return v
	}
	answer = `{"number":1,"state":"open","head":{"ref":"b","sha":"s"}}`
	pr := get()
	require.Empty(t, c.Violations())
	require.Equal(t, "b", pr["head"].(map[string]any)["ref"], "the fake's values are kept")
	require.Contains(t, pr, "merged_at", "required fields are filled")
	require.Contains(t, pr["head"], "repo")

	answer = `{"number":"1","state":"open"}`
	get()
	require.Len(t, c.Violations(), 1)
	require.Contains(t, c.Violations()[0], "number")
}
