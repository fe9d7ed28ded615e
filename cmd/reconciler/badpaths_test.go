package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
)

// badWrite is one bad object of the issue 29 campaign: the object's PUT
// path and body, the same object as an apply document, and what every
// refusal names (any of the |-separated texts: the CLI reads YAML, whose
// parser words some refusals first).
type badWrite struct {
	name      string
	path, put string // PUT /api/v1<path> with body put
	doc       string // the apply document
	names     string
}

// badWrites are the campaign's bad objects, one or more per case the
// issue lists for API PUT and apply.
var badWrites = []badWrite{
	{"id outside the grammar", "/job-agents/%C3%A4", `{"id":"ä","name":"x","type":"api"}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"JobAgent","metadata":{"name":"ä"},"spec":{"name":"x","type":"api"}}`, "is not a valid id"},
	{"id starting with a dot", "/job-agents/.x", `{"id":".x","name":"x","type":"api"}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"JobAgent","metadata":{"name":".x"},"spec":{"name":"x","type":"api"}}`, "is not a valid id"},
	{"missing job agent", "/deployments/api2", `{"id":"api2","system_id":"shop","name":"api2","slug":"api2","job_agent_id":"nosuch","resource_selector":"true"}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"Deployment","metadata":{"name":"api2","system":"shop"},"spec":{"name":"api2","slug":"api2","job_agent_id":"nosuch","resource_selector":"true"}}`, `"nosuch" does not exist`},
	{"unknown agent type", "/job-agents/j", `{"id":"j","name":"j","type":"nosuch-type"}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"JobAgent","metadata":{"name":"j"},"spec":{"name":"j","type":"nosuch-type"}}`, `unknown job agent type "nosuch-type"`},
	{"pull lease forever", "/job-agents/j", `{"id":"j","name":"j","type":"pull","config":{"lease":"forever"}}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"JobAgent","metadata":{"name":"j"},"spec":{"name":"j","type":"pull","config":{"lease":"forever"}}}`, "lease"},
	{"bidi override in a name", "/environments/e", `{"id":"e","system_id":"shop","name":"e9\u202egnp.exe","resource_selector":"true"}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"Environment","metadata":{"name":"e","system":"shop"},"spec":{"name":"e9\u202egnp.exe","resource_selector":"true"}}`, "U+202E"},
	{"control character in a name", "/environments/e", `{"id":"e","system_id":"shop","name":"a\u0007b","resource_selector":"true"}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"Environment","metadata":{"name":"e","system":"shop"},"spec":{"name":"a\u0007b","resource_selector":"true"}}`, "control character|U+0007"},
	{"NUL in a name", "/environments/e", `{"id":"e","system_id":"shop","name":"a\u0000b","resource_selector":"true"}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"Environment","metadata":{"name":"e","system":"shop"},"spec":{"name":"a\u0000b","resource_selector":"true"}}`, "NUL|U+0000|control character"},
	{"duplicate key", "/environments/e", `{"id":"e","system_id":"shop","name":"a","name":"b","resource_selector":"true"}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"Environment","metadata":{"name":"e","system":"shop"},"spec":{"name":"a","name":"b","resource_selector":"true"}}`, `duplicate key "name"|"name" already defined`},
	{"selector not boolean", "/environments/e", `{"id":"e","system_id":"shop","name":"e","resource_selector":"1"}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"Environment","metadata":{"name":"e","system":"shop"},"spec":{"name":"e","resource_selector":"1"}}`, "resource_selector"},
	{"system moved to another workspace", "/systems/shop", `{"id":"shop","workspace_id":"other","name":"Shop"}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"System","metadata":{"name":"shop","workspace":"other"},"spec":{"name":"Shop"}}`, "workspace"},
	{"policy without priority and a bad selector", "/policies/p", `{"id":"p","workspace_id":"w","name":"p","selector":"nosuch(","enabled":true,"rules":[]}`,
		`{"apiVersion":"reconciler.dev/v1","kind":"Policy","metadata":{"name":"p","workspace":"w"},"spec":{"name":"p","selector":"nosuch(","enabled":true,"rules":[]}}`, "selector"},
}

// TestBadWritesEveryPath runs each bad object of the campaign through every
// write path over one PostgreSQL database: the API's PUT, the API's apply,
// `reconciler apply --server` and `reconciler apply --dsn`. Each refuses
// it (4xx application/problem+json, or exit 2) naming the field, never
// with a 5xx, and at the end no row of any table has changed (no object,
// no audit entry).
func TestBadWritesEveryPath(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn, schema := pgtest.Schema(t)
	clock := ports.SystemClock
	be, err := openBackend(ctx, dsn, true, clock)
	require.NoError(t, err)
	t.Cleanup(be.close)
	url := backendAPIServer(t, be, func(o *api.Options) {
		o.Catalog, o.Tx, o.Audit, o.AgentConfig = catalog.New(be.catalog, be.catalogConfig()), be.tx, be.audit, agentConfigValidator()
	})
	_, tok, err := api.IssueToken(ctx, be.tokens, clock, "campaign", []ports.Scope{ports.ScopeAdmin})
	require.NoError(t, err)

	seed := `{"apiVersion":"reconciler.dev/v1","kind":"Workspace","metadata":{"name":"w"},"spec":{"name":"W"}}
---
{"apiVersion":"reconciler.dev/v1","kind":"Workspace","metadata":{"name":"other"},"spec":{"name":"Other"}}
---
{"apiVersion":"reconciler.dev/v1","kind":"System","metadata":{"name":"shop","workspace":"w"},"spec":{"name":"Shop"}}
---
{"apiVersion":"reconciler.dev/v1","kind":"JobAgent","metadata":{"name":"runner"},"spec":{"name":"Runner","type":"api"}}
---
{"apiVersion":"reconciler.dev/v1","kind":"Environment","metadata":{"name":"prod","system":"shop"},"spec":{"name":"prod","resource_selector":"true"}}
`
	r := runCLI(t, seed, "apply", "-f", "-", "--dsn", dsn)
	require.Equal(t, 0, r.code, "%s %v", r.stderr, r.err)
	before := fingerprint(t, dsn, schema)

	send := func(method, path, body string) (int, string, string) {
		req, err := http.NewRequestWithContext(ctx, method, url+"/api/v1"+path, bytes.NewBufferString(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		// The problem's detail and errors, unescaped, are what it says.
		var p struct {
			Detail string `json:"detail"`
			Errors []struct {
				Message, Location string
			} `json:"errors"`
		}
		text := string(b)
		if json.Unmarshal(b, &p) == nil {
			text = p.Detail
			for _, e := range p.Errors {
				text += "; " + e.Location + ": " + e.Message
			}
		}
		return res.StatusCode, res.Header.Get("Content-Type"), text
	}
	var report []string
	for _, tc := range badWrites {
		names := strings.Split(tc.names, "|")
		for _, w := range []struct{ how, method, path, body string }{
			{"PUT", http.MethodPut, tc.path, tc.put},
			{"POST /apply", http.MethodPost, "/apply", `{"documents":[` + tc.doc + `]}`},
		} {
			status, ct, body := send(w.method, w.path, w.body)
			if status < 400 || status >= 500 || ct != "application/problem+json" || !containsAny(body, names) {
				report = append(report, fmt.Sprintf("%s, %s: %d %s %s", tc.name, w.how, status, ct, firstLine(body)))
			}
		}
		for _, how := range [][]string{{"--server", url, "--token", tok}, {"--dsn", dsn}} {
			r := runCLI(t, tc.doc, append([]string{"apply", "-f", "-"}, how...)...)
			msg := r.stderr
			if r.err != nil {
				msg += r.err.Error()
			}
			if r.code != 2 || !containsAny(msg, names) {
				report = append(report, fmt.Sprintf("%s, apply %s: exit %d %s", tc.name, how[0], r.code, firstLine(msg)))
			}
		}
	}
	require.Empty(t, report, "of %d bad objects on 4 paths, these were not refused alike naming the field", len(badWrites))
	require.Equal(t, before, fingerprint(t, dsn, schema), "a refused write changed the database")
}
