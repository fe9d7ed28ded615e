package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// badObjects are documents every write path refuses alike: each has the
// object's PUT path and body, the same object as an apply document, and
// what the refusal says.
var badObjects = []struct {
	name       string
	path, body string // PUT
	doc        string // apply
	want       string
}{
	{"id outside the grammar", "/job-agents/" + url.PathEscape("ä"), `{"id":"ä","name":"x","type":"api"}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"JobAgent","metadata":{"name":"ä"},"spec":{"name":"x","type":"api"}}`, "is not a valid id"},
	{"id with a dot only", "/job-agents/.x", `{"id":".x","name":"x","type":"api"}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"JobAgent","metadata":{"name":".x"},"spec":{"name":"x","type":"api"}}`, "is not a valid id"},
	{"missing job agent", "/deployments/api", `{"id":"api","system_id":"sys","name":"api","slug":"api","job_agent_id":"nosuch","resource_selector":"true"}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"Deployment","metadata":{"name":"api","system":"sys"},"spec":{"name":"api","slug":"api","job_agent_id":"nosuch","resource_selector":"true"}}`, `"nosuch" does not exist`},
	{"unknown agent type", "/job-agents/j", `{"id":"j","name":"j","type":"nosuch-type"}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"JobAgent","metadata":{"name":"j"},"spec":{"name":"j","type":"nosuch-type"}}`, `unknown job agent type "nosuch-type"`},
	{"pull lease forever", "/job-agents/j", `{"id":"j","name":"j","type":"pull","config":{"lease":"forever"}}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"JobAgent","metadata":{"name":"j"},"spec":{"name":"j","type":"pull","config":{"lease":"forever"}}}`, "lease"},
	{"bidi override in a name", "/environments/e", `{"id":"e","system_id":"sys","name":"e9\u202egnp.exe","resource_selector":"true"}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"Environment","metadata":{"name":"e","system":"sys"},"spec":{"name":"e9\u202egnp.exe","resource_selector":"true"}}`, "bidirectional formatting character U+202E"},
	{"lone surrogate in a name", "/environments/e", `{"id":"e","system_id":"sys","name":"a\ud800","resource_selector":"true"}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"Environment","metadata":{"name":"e","system":"sys"},"spec":{"name":"a\ud800","resource_selector":"true"}}`, `lone UTF-16 surrogate \ud800`},
	{"invalid UTF-8 in a name", "/environments/e", "{\"id\":\"e\",\"system_id\":\"sys\",\"name\":\"a\xffb\",\"resource_selector\":\"true\"}",
		"{\"apiVersion\":\"reconciler.dev/v1\",\"kind\":\"Environment\",\"metadata\":{\"name\":\"e\",\"system\":\"sys\"},\"spec\":{\"name\":\"a\xffb\",\"resource_selector\":\"true\"}}", "invalid UTF-8"},
	{"duplicate key", "/environments/e", `{"id":"e","system_id":"sys","name":"a","name":"b","resource_selector":"true"}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"Environment","metadata":{"name":"e","system":"sys"},"spec":{"name":"a","name":"b","resource_selector":"true"}}`, `duplicate key "name"`},
}

// TestBadObjectsRefusedAlike runs each bad document through the API's PUT
// and through apply: both refuse it with 422 saying the same thing, and
// neither stores anything.
func TestBadObjectsRefusedAlike(t *testing.T) {
	for _, tc := range badObjects {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t, "memory")
			p := f.do(http.MethodPut, "/api/v1"+tc.path, "admin", tc.body).problem(t, http.StatusUnprocessableEntity)
			require.Contains(t, problemText(p), tc.want, "PUT")
			p = f.do(http.MethodPost, "/api/v1/apply", "admin", `{"documents":[`+tc.doc+`]}`).problem(t, http.StatusUnprocessableEntity)
			require.Contains(t, problemText(p), tc.want, "apply")
			if !strings.Contains(tc.path, "%") && !strings.Contains(tc.path, "/.") {
				f.do(http.MethodGet, "/api/v1"+tc.path, "read", nil).problem(t, http.StatusNotFound)
			}
		})
	}
}

// TestSystemMoveRefused: a PUT cannot move a system to another workspace;
// like apply, it answers 422 naming the field (invalid input, not a
// conflict a retry could resolve).
func TestSystemMoveRefused(t *testing.T) {
	f := setup(t, "memory")
	require.Equal(t, http.StatusOK, f.do(http.MethodPut, "/api/v1/workspaces/other", "admin", `{"id":"other","name":"other"}`).status)
	p := f.do(http.MethodPut, "/api/v1/systems/sys", "admin", `{"id":"sys","workspace_id":"other","name":"shop"}`).problem(t, http.StatusUnprocessableEntity)
	require.Contains(t, locations(p), "body.workspace_id")
	res := f.do(http.MethodGet, "/api/v1/systems/sys", "read", nil)
	require.Contains(t, string(res.body), `"workspace_id":"ws"`)
}

// problemText is a problem's detail and its errors' messages.
func problemText(p map[string]any) string {
	var b strings.Builder
	d, _ := p["detail"].(string)
	b.WriteString(d)
	errs, _ := p["errors"].([]any)
	for _, e := range errs {
		if m, ok := e.(map[string]any); ok {
			msg, _ := m["message"].(string)
			b.WriteString("\n" + msg)
		}
	}
	return b.String()
}

// TestBadRunAndWorkflowStarts: a repo run depending on an unknown run and
// a workflow at a negative revision are refused, naming the field
// (issue 29).
func TestBadRunAndWorkflowStarts(t *testing.T) {
	f := setup(t, "memory")
	p := f.do(http.MethodPost, "/api/v1/runs", "write", map[string]any{"kind": "repo", "id": "r1", "repo": "acme/api", "depends_on": []string{"nosuch"}}).
		problem(t, http.StatusUnprocessableEntity)
	require.Contains(t, problemText(p), `"nosuch" does not exist`)
	require.Contains(t, locations(p), "body.depends_on[0]")
	p = f.do(http.MethodPost, "/api/v1/workflows", "write", map[string]any{"template": "x", "revision": -1}).problem(t, http.StatusUnprocessableEntity)
	require.Contains(t, locations(p), "body.revision")
}

// TestPolicyWithoutPriority: priority is optional (0), so a policy PUT
// without it reports its real error (issue 29).
func TestPolicyWithoutPriority(t *testing.T) {
	f := setup(t, "memory")
	p := f.do(http.MethodPut, "/api/v1/policies/p1", "admin", `{"id":"p1","workspace_id":"ws","name":"p","selector":"nosuch(","enabled":true,"rules":[]}`).
		problem(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"body.selector"}, locations(p))
	res := f.do(http.MethodPut, "/api/v1/policies/p1", "admin", `{"id":"p1","workspace_id":"ws","name":"p","enabled":true,"rules":[]}`)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
}

// TestPolicyNamesItsWorkspace: a policy PUT without a workspace, or naming
// one that does not exist, is a 422 naming body.workspace_id and stores
// nothing (issue 29: policies belong to a workspace).
func TestPolicyNamesItsWorkspace(t *testing.T) {
	f := setup(t, "memory")
	for _, body := range []string{
		`{"id":"p1","name":"p","enabled":true,"rules":[]}`,
		`{"id":"p1","workspace_id":"nowhere","name":"p","enabled":true,"rules":[]}`,
	} {
		p := f.do(http.MethodPut, "/api/v1/policies/p1", "admin", body).problem(t, http.StatusUnprocessableEntity)
		require.Equal(t, []string{"body.workspace_id"}, locations(p), body)
	}
	f.do(http.MethodGet, "/api/v1/policies/p1", "admin", nil).problem(t, http.StatusNotFound)
}
