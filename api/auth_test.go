package api_test

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/ports"
)

func TestAuth(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		body := map[string]any{"deployment_id": "web", "tag": "v1"}
		res := f.do(http.MethodPost, "/api/v1/versions", "", body)
		p := res.problem(t, http.StatusUnauthorized)
		require.Contains(t, p["detail"], "missing bearer token")
		require.Contains(t, res.header.Get("WWW-Authenticate"), "Bearer")

		f.tokens["bogus"] = "rcn_nope_nope"
		require.Contains(t, f.do(http.MethodPost, "/api/v1/versions", "bogus", body).problem(t, http.StatusUnauthorized)["detail"], "unknown token")
		require.Contains(t, f.do(http.MethodPost, "/api/v1/versions", "revoked", body).problem(t, http.StatusUnauthorized)["detail"], "revoked")
		require.Contains(t, f.do(http.MethodPost, "/api/v1/versions", "read", body).problem(t, http.StatusForbidden)["detail"], "lacks scope write")
		f.do(http.MethodPost, "/api/v1/versions/web-v1/approvals", "write", map[string]any{"environment_id": "prod"}).problem(t, http.StatusForbidden)
		f.do(http.MethodGet, "/api/v1/versions?deployment_id=web", "agent", nil).problem(t, http.StatusForbidden)

		// Refused requests changed nothing.
		f.do(http.MethodGet, "/api/v1/versions/web-v1", "read", nil).problem(t, http.StatusNotFound)
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", body).status)
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "admin", map[string]any{"deployment_id": "web", "tag": "v2"}).status, "admin has every scope")

		f.do(http.MethodGet, "/api/v1/openapi.json", "", nil).problem(t, http.StatusUnauthorized)
		require.Equal(t, http.StatusOK, f.do(http.MethodGet, "/api/v1/openapi.json", "read", nil).status)
		f.do(http.MethodGet, "/api/v1/nothing-here", "read", nil).problem(t, http.StatusNotFound)
	})
}

// TestTokenExpiry: a token is accepted until its expiry, then refused with
// 401 and a problem saying it expired.
func TestTokenExpiry(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		tok, secret, err := api.IssueToken(f.ctx, f.st.tokens, f.clock, "short", []ports.Scope{ports.ScopeRead}, api.ExpiresAt(f.clock.Now().Add(time.Hour)))
		require.NoError(t, err)
		f.tokens["short"] = secret
		require.Equal(t, http.StatusOK, f.do(http.MethodGet, "/api/v1/versions?deployment_id=web", "short", nil).status)
		f.clock.Advance(time.Hour)
		res := f.do(http.MethodGet, "/api/v1/versions?deployment_id=web", "short", nil)
		p := res.problem(t, http.StatusUnauthorized)
		require.Contains(t, p["detail"], "token "+tok.ID+" expired at ")
		require.Contains(t, res.header.Get("WWW-Authenticate"), "Bearer")
		f.do(http.MethodGet, "/api/v1/openapi.json", "short", nil).problem(t, http.StatusUnauthorized)
		_, _, err = api.IssueToken(f.ctx, f.st.tokens, f.clock, "past", []ports.Scope{ports.ScopeRead}, api.ExpiresAt(f.clock.Now().Add(-time.Second)))
		require.ErrorContains(t, err, "expires_at")
	})
}

func TestInsecureActsAsAnonymous(t *testing.T) {
	t.Parallel()
	f := setup(t, "memory")
	srv := api.New(api.Options{Chain: f.chain, Releases: f.st.releases, Tokens: f.st.tokens, Clock: f.clock, Insecure: true})
	f.http.Config.Handler = srv.Handler()
	require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
	res := f.do(http.MethodPost, "/api/v1/versions/web-v1/approvals", "", map[string]any{"environment_id": "prod"})
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	require.Equal(t, "anonymous", res.json(t)["approval"].(map[string]any)["user"])
}

func TestOpenAPIDocumentIsCommitted(t *testing.T) {
	t.Parallel()
	f := setup(t, "memory")
	res := f.do(http.MethodGet, "/api/v1/openapi.json", "read", nil)
	require.Equal(t, http.StatusOK, res.status)
	const path = "../docs/openapi.json"
	if os.Getenv("UPDATE_OPENAPI") == "1" {
		require.NoError(t, os.WriteFile(path, res.body, 0o644))
	}
	committed, err := os.ReadFile(path)
	require.NoError(t, err, "run UPDATE_OPENAPI=1 go test ./api/ -run OpenAPI to write it")
	require.Equal(t, string(committed), string(res.body), "docs/openapi.json is stale: run UPDATE_OPENAPI=1 go test ./api/ -run OpenAPI")
	require.Contains(t, res.json(t)["openapi"], "3.1")
}

// signed returns the headers of a report body on jobID signed at ts with
// secret.
func signed(method, path, secret, subject string, ts time.Time, body []byte) []string {
	path, _, _ = strings.Cut(path, "?")
	return []string{api.TimestampHeader, strconv.FormatInt(ts.Unix(), 10), api.SignatureHeader, api.SignRequest(secret, ts, method, path, subject, body)}
}
