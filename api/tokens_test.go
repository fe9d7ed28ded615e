package api_test

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/ports"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		res := f.do(http.MethodPost, "/api/v1/tokens", "admin", map[string]any{"name": "ci", "scopes": []string{"read", "write"}, "expires_in": "1h"})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		var created api.TokenCreated
		require.NoError(t, json.Unmarshal(res.body, &created))
		require.Equal(t, "ci", created.Token.Name)
		require.Equal(t, []ports.Scope{ports.ScopeRead, ports.ScopeWrite}, created.Token.Scopes)
		require.Equal(t, f.clock.Now().Add(time.Hour).UTC(), created.Token.ExpiresAt.UTC())
		require.True(t, strings.HasPrefix(created.Secret, "rcn_"+created.Token.ID+"_"), created.Secret)

		// The secret works, with its scopes only.
		use := func(method, path string) response {
			f.tokens["new"] = created.Secret
			return f.do(method, path, "new", nil)
		}
		require.Equal(t, http.StatusOK, use(http.MethodGet, "/api/v1/jobs").status)
		use(http.MethodGet, "/api/v1/tokens").problem(t, http.StatusForbidden)

		// The list has the token, never its secret or its hash.
		res = f.do(http.MethodGet, "/api/v1/tokens", "admin", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		var list []ports.Token
		require.NoError(t, json.Unmarshal(res.body, &list))
		ids := map[string]ports.Token{}
		for _, tok := range list {
			ids[tok.ID] = tok
		}
		require.Contains(t, ids, created.Token.ID)
		require.Len(t, list, len(ports.Scopes)+3, "one per scope, the revoked one, the unrelated agent one and the new one")
		hash := api.HashSecret(created.Secret)
		for _, secret := range []string{created.Secret, hex.EncodeToString(hash), base64.StdEncoding.EncodeToString(hash), base64.RawURLEncoding.EncodeToString(hash)} {
			require.NotContains(t, string(res.body), secret)
		}
		require.NotContains(t, string(res.body), "hash")

		// Expiry: refused (401) once the hour is over.
		f.clock.Advance(time.Hour)
		p := use(http.MethodGet, "/api/v1/jobs").problem(t, http.StatusUnauthorized)
		require.Contains(t, p["detail"], "expired")

		// Revoke: refused from then on; revoking again is no error.
		res = f.do(http.MethodPost, "/api/v1/tokens", "admin", map[string]any{"name": "short", "scopes": []string{"read"}})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		created = api.TokenCreated{}
		require.NoError(t, json.Unmarshal(res.body, &created))
		require.True(t, created.Token.ExpiresAt.IsZero(), "no expiry: valid until revoked")
		require.Equal(t, http.StatusOK, use(http.MethodGet, "/api/v1/jobs").status)
		require.Equal(t, http.StatusNoContent, f.do(http.MethodDelete, "/api/v1/tokens/"+created.Token.ID, "admin", nil).status)
		p = use(http.MethodGet, "/api/v1/jobs").problem(t, http.StatusUnauthorized)
		require.Contains(t, p["detail"], "revoked")
		require.Equal(t, http.StatusNoContent, f.do(http.MethodDelete, "/api/v1/tokens/"+created.Token.ID, "admin", nil).status)
		f.do(http.MethodDelete, "/api/v1/tokens/nope", "admin", nil).problem(t, http.StatusNotFound)

		// Auth: admin scope only.
		for _, tok := range []string{"read", "write", "approve", "agent"} {
			f.do(http.MethodPost, "/api/v1/tokens", tok, map[string]any{"name": "x", "scopes": []string{"read"}}).problem(t, http.StatusForbidden)
			f.do(http.MethodGet, "/api/v1/tokens", tok, nil).problem(t, http.StatusForbidden)
			f.do(http.MethodDelete, "/api/v1/tokens/"+created.Token.ID, tok, nil).problem(t, http.StatusForbidden)
		}
		f.do(http.MethodGet, "/api/v1/tokens", "", nil).problem(t, http.StatusUnauthorized)
		f.do(http.MethodGet, "/api/v1/tokens", "revoked", nil).problem(t, http.StatusUnauthorized)

		// Bad bodies: each names its field and creates nothing.
		before := len(f.tokenList(t))
		for _, c := range []struct {
			body any
			loc  string
		}{
			{map[string]any{"scopes": []string{"read"}}, "body.name"},
			{map[string]any{"name": "", "scopes": []string{"read"}}, "body.name"},
			{map[string]any{"name": "a\x1b[31mb", "scopes": []string{"read"}}, "body.name"},
			{map[string]any{"name": strings.Repeat("n", 201), "scopes": []string{"read"}}, "body.name"},
			{map[string]any{"name": "x"}, "body.scopes"},
			{map[string]any{"name": "x", "scopes": []string{}}, "body.scopes"},
			{map[string]any{"name": "x", "scopes": []string{"read", "root"}}, "body.scopes[1]"},
			{map[string]any{"name": "x", "scopes": []string{"read"}, "expires_in": "soon"}, "body.expires_in"},
			{map[string]any{"name": "x", "scopes": []string{"read"}, "expires_in": "-1h"}, "body.expires_in"},
			{map[string]any{"name": "x", "scopes": []string{"read"}, "expires_in": "87601h"}, "body.expires_in"},
			{map[string]any{"name": "x", "scopes": []string{"read"}, "secret": "mine"}, "body.secret"},
			{map[string]any{"name": "x", "scopes": []string{"agent"}}, "body.agents"},
			{map[string]any{"name": "x", "scopes": []string{"agent"}, "agents": []string{}}, "body.agents"},
			{map[string]any{"name": "x", "scopes": []string{"read"}, "agents": []string{"ext"}}, "body.agents"},
			{map[string]any{"name": "x", "scopes": []string{"agent"}, "agents": []string{"ext", ""}}, "body.agents[1]"},
		} {
			p := f.do(http.MethodPost, "/api/v1/tokens", "admin", c.body).problem(t, http.StatusUnprocessableEntity)
			require.Contains(t, locations(p), c.loc, "%v: %v", c.body, p)
		}
		p = f.do(http.MethodPost, "/api/v1/tokens", "admin", `{"name": "x", "scopes": ["read"]`).problem(t, http.StatusBadRequest)
		require.Contains(t, locations(p), "body")
		f.do(http.MethodPost, "/api/v1/tokens", "admin", `{"name":"`+strings.Repeat("x", 70<<10)+`","scopes":["read"]}`).problem(t, http.StatusRequestEntityTooLarge)
		require.Len(t, f.tokenList(t), before, "a refused body creates no token")

		// The client.
		admin, err := client.New(f.http.URL, f.tokens["admin"])
		require.NoError(t, err)
		got, err := admin.CreateToken(f.ctx, api.TokenCreate{Name: "from-client", Scopes: []ports.Scope{ports.ScopeAgent}, ExpiresIn: "2h", Agents: []string{"ext"}})
		require.NoError(t, err)
		require.Equal(t, []string{"ext"}, got.Token.Agents)
		require.Equal(t, f.clock.Now().Add(2*time.Hour).UTC(), got.Token.ExpiresAt.UTC())
		all, err := admin.ListTokens(f.ctx)
		require.NoError(t, err)
		require.Len(t, all, before+1)
		require.NoError(t, admin.RevokeToken(f.ctx, got.Token.ID))
		require.ErrorIs(t, admin.RevokeToken(f.ctx, "nope"), ports.ErrNotFound)
	})
}

// tokenList reads every stored token.
func (f *fixture) tokenList(t *testing.T) []ports.Token {
	t.Helper()
	list, err := f.st.tokens.TokenList(f.ctx)
	require.NoError(t, err)
	return list
}
