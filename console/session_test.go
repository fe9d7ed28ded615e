package console_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/console"
)

// TestLogoutEndsTheSession: logout revokes the session's own token, so a
// copy of the cookie taken before is refused afterwards; the token the
// user logged in with stays valid for the API, and revoking it ends its
// sessions at once.
func TestLogoutEndsTheSession(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := f.login("read")
	stolen := c.http.Jar.Cookies(mustURL(t, f.srv.URL))
	require.Len(t, stolen, 1)
	require.NotContains(t, stolen[0].Value, f.tokens["read"], "the cookie does not carry the login token")

	thief := f.anonymous()
	thief.http.Jar.SetCookies(mustURL(t, f.srv.URL), stolen)
	require.Equal(t, http.StatusOK, thief.get("/").status, "the copied cookie works while the session lasts")

	require.Equal(t, http.StatusSeeOther, c.submit("/logout", nil).status)
	require.Equal(t, http.StatusSeeOther, thief.get("/").status, "after logout the copied cookie is refused")
	tok, err := api.LookupToken(f.ctx, f.tokenStore, f.tokens["read"], f.clock.Now())
	require.NoError(t, err, "the login token itself is not revoked")

	// Revoking the login token ends the sessions opened with it.
	again := f.login("read")
	require.Equal(t, http.StatusOK, again.get("/").status)
	require.NoError(t, f.tokenStore.TokenRevoke(f.ctx, tok.ID, f.clock.Now()))
	require.Equal(t, http.StatusSeeOther, again.get("/").status)
}

// TestNextIsLocal: the login page's next takes only a path of this site.
func TestNextIsLocal(t *testing.T) {
	t.Parallel()
	f := setup(t)
	anon := f.anonymous()
	for next, kept := range map[string]bool{
		"/workflows":           true,
		"/targets/web:prod":    true,
		"//evil.example":       false,
		"/\\evil.example":      false,
		"/\t/evil.example":     false,
		"/\r\n/evil.example":   false,
		"/a\\b":                false,
		"https://evil.example": false,
		"evil.example":         false,
		"":                     false,
	} {
		want := `name="next" value="/"`
		if kept {
			want = `name="next" value="` + next + `"`
		}
		if strings.ContainsFunc(next, unicode.IsControl) {
			// A control character in a query is refused before any page.
			require.Equal(t, http.StatusBadRequest, anon.get("/login?next="+url.QueryEscape(next)).status, "next %q", next)
		} else {
			require.Contains(t, anon.page("/login?next="+url.QueryEscape(next)), want, "next %q", next)
		}
		res := anon.post("/login", url.Values{"token": {f.tokens["read"]}, "next": {next}})
		require.Equal(t, http.StatusSeeOther, res.status)
		if !kept {
			require.Equal(t, "/", res.header.Get("Location"), "next %q", next)
		}
	}
}

// TestSecureCookieBehindProxy: with SecureCookie (serve --public-url
// https://…) the cookie is Secure on a plain HTTP request.
func TestSecureCookieBehindProxy(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := console.New(console.Options{Tokens: f.tokenStore, Clock: f.clock, Releases: f.rel, Workflows: f.wfs, SecureCookie: true})
	req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"token": {f.tokens["read"]}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	require.Contains(t, rec.Header().Get("Set-Cookie"), "; Secure")
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}
