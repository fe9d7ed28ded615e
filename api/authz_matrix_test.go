package api_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/ports"
)

// credential is one kind of caller of the authorization matrix: how its
// Authorization header is made, whether it names a valid token at all and
// which scopes that token grants. A new kind of token (e.g. an agent
// token bound to job agents) is one more row of credentials.
type credential struct {
	name string
	// auth returns the Authorization header ("" sends none).
	auth func(t *testing.T, f *fixture) string
	// valid: the header names a token that is known, unexpired and not
	// revoked (else every route answers 401).
	valid  bool
	scopes []ports.Scope
	// elsewhere: an agent token bound to job agents other than the one
	// the routes name, so an agent route is refused (403), finds nothing
	// of its own (404) or fails the empty body's schema (422), never done;
	// TestAgentTokenBound sends valid bodies.
	elsewhere bool
}

// issued is a credential's auth for a fresh token with scopes and opts.
func issued(scopes []ports.Scope, opts ...api.TokenOption) func(t *testing.T, f *fixture) string {
	return func(t *testing.T, f *fixture) string {
		_, secret, err := api.IssueToken(f.ctx, f.st.tokens, f.clock, "matrix", scopes, opts...)
		require.NoError(t, err)
		return "Bearer " + secret
	}
}

// credentials are the callers every route is tried with.
func credentials() []credential {
	creds := []credential{
		{name: "none", auth: func(*testing.T, *fixture) string { return "" }},
		{name: "malformed", auth: func(*testing.T, *fixture) string { return "Basic dXNlcjpwdw==" }},
		{name: "unknown", auth: func(*testing.T, *fixture) string { return "Bearer rcn_000000000000_nope" }},
		{name: "expired", auth: func(t *testing.T, f *fixture) string {
			h := issued([]ports.Scope{ports.ScopeAdmin}, api.ExpiresAt(f.clock.Now().Add(time.Minute)))(t, f)
			f.clock.Advance(time.Minute)
			return h
		}},
		{name: "revoked", auth: func(t *testing.T, f *fixture) string {
			tok, secret, err := api.IssueToken(f.ctx, f.st.tokens, f.clock, "matrix", []ports.Scope{ports.ScopeAdmin})
			require.NoError(t, err)
			require.NoError(t, f.st.tokens.TokenRevoke(f.ctx, tok.ID, f.clock.Now()))
			return "Bearer " + secret
		}},
	}
	for _, s := range ports.Scopes {
		var opts []api.TokenOption
		if s == ports.ScopeAgent {
			opts = append(opts, api.ForAgents("matrix-x")) // the job agent every {id} names
		}
		creds = append(creds, credential{name: string(s), auth: issued([]ports.Scope{s}, opts...), valid: true, scopes: []ports.Scope{s}})
	}
	creds = append(creds, credential{name: "agent-elsewhere", auth: issued([]ports.Scope{ports.ScopeAgent}, api.ForAgents("matrix-other")),
		valid: true, scopes: []ports.Scope{ports.ScopeAgent}, elsewhere: true})
	return creds
}

// route is an operation of the OpenAPI document and the scope it needs.
type route struct {
	method, path string
	scope        ports.Scope
}

// needsScope is how every operation's description names its scope.
var needsScope = regexp.MustCompile("Needs scope `([a-z]+)`")

// documentedRoutes reads every operation of the served OpenAPI document;
// an operation that does not name its scope fails the test.
func documentedRoutes(t *testing.T, doc []byte) []route {
	t.Helper()
	var spec struct {
		Paths map[string]map[string]struct {
			Description string `json:"description"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(doc, &spec))
	var routes []route
	for path, ops := range spec.Paths {
		for method, op := range ops {
			m := needsScope.FindStringSubmatch(op.Description)
			require.NotNil(t, m, "%s %s: its description names no scope", strings.ToUpper(method), path)
			routes = append(routes, route{method: strings.ToUpper(method), path: path, scope: ports.Scope(m[1])})
		}
	}
	routes = append(routes, route{method: http.MethodGet, path: api.Prefix + "/openapi.json", scope: ports.ScopeRead})
	sort.Slice(routes, func(i, j int) bool { return routes[i].path+routes[i].method < routes[j].path+routes[j].method })
	return routes
}

// pathParam is a path parameter in the document's paths.
var pathParam = regexp.MustCompile(`\{[^}]+\}`)

// TestAuthorizationMatrix: every route of the OpenAPI document, tried
// with every kind of credential, answers 401 to a caller without a valid
// token, 403 to a token without the route's scope, and neither (nor a
// 5xx) to a token with it (issue 28).
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	f := setup(t, "memory")
	doc, err := f.server.OpenAPI()
	require.NoError(t, err)
	routes := documentedRoutes(t, doc)
	require.Greater(t, len(routes), 50, "the document lists the API's routes")
	t.Logf("%d routes × %d kinds of credential", len(routes), len(credentials()))
	for _, c := range credentials() {
		auth := c.auth(t, f)
		token := "matrix-" + c.name
		f.tokens[token] = strings.TrimPrefix(auth, "Bearer ")
		for _, r := range routes {
			path := pathParam.ReplaceAllString(r.path, "matrix-x")
			var body any
			if r.method != http.MethodGet && r.method != http.MethodDelete {
				body = map[string]any{}
			}
			var res response
			switch {
			case auth == "":
				res = f.do(r.method, path, "", body)
			case strings.HasPrefix(auth, "Bearer "):
				res = f.do(r.method, path, token, body)
			default:
				res = f.do(r.method, path, "", body, "Authorization", auth)
			}
			where := c.name + " " + r.method + " " + r.path + ": " + string(res.body)
			granted := slices.Contains(c.scopes, r.scope) || slices.Contains(c.scopes, ports.ScopeAdmin)
			switch {
			case !c.valid:
				require.Equal(t, http.StatusUnauthorized, res.status, where)
			case !granted:
				require.Equal(t, http.StatusForbidden, res.status, where)
				require.Contains(t, string(res.body), "lacks scope "+string(r.scope), where)
			case c.elsewhere && r.scope == ports.ScopeAgent:
				require.Contains(t, []int{http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity}, res.status, where)
			default:
				require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, res.status, where)
				require.Less(t, res.status, 500, where)
			}
		}
	}
}
