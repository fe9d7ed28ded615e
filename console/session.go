package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/ports"
)

// CookieName is the session cookie: it holds the API token the user logged
// in with (HttpOnly, SameSite=Strict, Secure when served over TLS or
// behind https, see Options.SecureCookie): a session token of its own,
// revoked at logout.
const CookieName = "reconciler_session"

// CSRFField is the form field (and CSRFHeader the header, for htmx
// requests) carrying the session's CSRF token on every POST.
const (
	CSRFField  = "csrf"
	CSRFHeader = "X-CSRF-Token"
)

// maxTokenLen bounds a token given at login or in the cookie.
const maxTokenLen = 512

// session is who a request acts as and what it may do.
type session struct {
	// Name is the token's name, recorded on approvals and cancellations.
	Name string
	// CSRF is the token every form of the page carries.
	CSRF string
	// Insecure is set when the console serves without a login.
	Insecure bool
	token    ports.Token
}

// Can reports whether the session's token grants scope (read, write,
// approve, agent or admin).
func (s session) Can(scope string) bool {
	return s.token.Allows(ports.Scope(scope))
}

// LoggedIn reports whether the request has a session.
func (s session) LoggedIn() bool { return s.Name != "" }

type sessionKey struct{}

// sessionOf is the request's session; zero on the login page.
func sessionOf(ctx context.Context) session {
	s, _ := ctx.Value(sessionKey{}).(session)
	return s
}

// csrfFor derives the CSRF token of a session from its token secret: an
// HMAC keyed by the secret, so it needs no server state, is the same on
// every replica, and reveals nothing of the secret. A page on another
// site can read neither the cookie nor the page, so it cannot forge it.
func csrfFor(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("reconciler console csrf v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// errNoSession is a request without a valid session cookie.
var errNoSession = errors.New("no session")

// DefaultSessionTTL is how long a console session lasts when
// Options.SessionTTL is zero.
const DefaultSessionTTL = 12 * time.Hour

// A session cookie is "SESSION_SECRET.LOGIN_TOKEN_ID": the secret of a
// token of its own, issued at login with the login token's name and
// scopes and an expiry of at most SessionTTL, and revoked at logout (so a
// copied cookie is useless once its user logged out); and the id of the
// token the user logged in with, which must still be valid (revoking it
// ends its sessions at once). Token secrets contain no ".".
const sessionSep = "."

// authenticate reads the session cookie and checks its token as the API
// checks a bearer token (unknown, expired or revoked tokens are refused),
// and that the token it was opened with is still valid.
func (s *Server) authenticate(r *http.Request) (session, error) {
	if s.o.Insecure {
		name := s.o.InsecurePrincipal
		if name == "" {
			name = "anonymous"
		}
		return session{Name: name, Insecure: true, token: ports.Token{Name: name, Scopes: []ports.Scope{ports.ScopeAdmin}}}, nil
	}
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" || len(c.Value) > 2*maxTokenLen {
		return session{}, errNoSession
	}
	secret, loginID, ok := strings.Cut(c.Value, sessionSep)
	if !ok || secret == "" || loginID == "" {
		return session{}, errNoSession
	}
	t, err := s.checkToken(r.Context(), secret)
	if err != nil {
		return session{}, err
	}
	if err := s.checkLogin(r.Context(), loginID); err != nil {
		return session{}, err
	}
	return session{Name: t.Name, CSRF: csrfFor(c.Value), token: t}, nil
}

// checkLogin reports errNoSession unless the token id a session was
// opened with is still valid.
func (s *Server) checkLogin(ctx context.Context, id string) error {
	toks, err := s.o.Tokens.TokenList(ctx)
	if err != nil {
		return fmt.Errorf("console session: list tokens: %w", err)
	}
	for _, t := range toks {
		if t.ID == id {
			if t.Revoked() || t.Expired(s.o.Clock.Now()) {
				return errNoSession
			}
			return nil
		}
	}
	return errNoSession
}

// openSession issues the session token of a login with t and returns the
// cookie value and how long it lasts.
func (s *Server) openSession(ctx context.Context, t ports.Token) (string, time.Duration, error) {
	ttl := s.o.SessionTTL
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	now := s.o.Clock.Now()
	until := now.Add(ttl)
	if !t.ExpiresAt.IsZero() && t.ExpiresAt.Before(until) {
		until = t.ExpiresAt
	}
	_, secret, err := api.IssueToken(ctx, s.o.Tokens, s.o.Clock, t.Name, slices.Clone(t.Scopes), api.ExpiresAt(until))
	if err != nil {
		return "", 0, fmt.Errorf("console session: %w", err)
	}
	return secret + sessionSep + t.ID, until.Sub(now), nil
}

// secureCookie reports whether the session cookie is Secure: served over
// TLS, or reached through https (Options.SecureCookie).
func (s *Server) secureCookie(r *http.Request) bool { return r.TLS != nil || s.o.SecureCookie }

// checkToken finds a valid token by its secret as the API does
// (api.LookupToken): errNoSession when it is unknown or no longer valid.
func (s *Server) checkToken(ctx context.Context, secret string) (ports.Token, error) {
	t, err := api.LookupToken(ctx, s.o.Tokens, secret, s.o.Clock.Now())
	var bad *api.BadTokenError
	if errors.As(err, &bad) {
		return t, errNoSession
	}
	return t, err
}

// page wraps a GET handler: a request without a session is sent to the
// login page (and back here after it).
func (s *Server) page(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, err := s.authenticate(r)
		switch {
		case errors.Is(err, errNoSession):
			if r.Header.Get("HX-Request") == "true" {
				// A poll whose session ended: reload the page, which logs in.
				w.Header().Set("HX-Refresh", "true")
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		case err != nil:
			s.fail(w, r, err)
			return
		}
		if !sess.Can(string(ports.ScopeRead)) {
			s.problem(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess)), http.StatusForbidden,
				"token "+sess.token.ID+" lacks scope read")
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess)))
	}
}

// action wraps a POST handler that needs scope: it refuses (403) a
// request from another site, one without the session's CSRF token and a
// token without scope, before reading anything else of the form; a
// request without a session is 401.
func (s *Server) action(scope ports.Scope, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if !sameOrigin(r) {
			s.problem(w, r, http.StatusForbidden, "cross-site request refused")
			return
		}
		sess, err := s.authenticate(r)
		switch {
		case errors.Is(err, errNoSession):
			s.problem(w, r, http.StatusUnauthorized, "log in first")
			return
		case err != nil:
			s.fail(w, r, err)
			return
		}
		ctx := context.WithValue(r.Context(), sessionKey{}, sess)
		r = r.WithContext(ctx)
		if err := r.ParseForm(); err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				s.problem(w, r, http.StatusRequestEntityTooLarge, "form larger than 64 KiB")
				return
			}
			s.problem(w, r, http.StatusBadRequest, "bad form: "+err.Error())
			return
		}
		if !sess.Insecure {
			got := r.PostFormValue(CSRFField)
			if got == "" {
				got = r.Header.Get(CSRFHeader)
			}
			if !hmac.Equal([]byte(got), []byte(sess.CSRF)) {
				s.problem(w, r, http.StatusForbidden, "missing or wrong CSRF token: reload the page and try again")
				return
			}
		}
		if !sess.Can(string(scope)) {
			s.problem(w, r, http.StatusForbidden, "token "+sess.token.ID+" lacks scope "+string(scope))
			return
		}
		s.audited(w, r, sess.Name, h)
	}
}

// sameOrigin refuses what a browser marks as sent from another site: a
// Sec-Fetch-Site other than same-origin (or none, typed by the user), or
// an Origin naming another host. Clients that send neither (curl) pass;
// they still need the cookie and the CSRF token.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// loginView is the login page's data.
type loginView struct {
	Next    string
	Message string
}

// loginPage shows the token form.
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	next := r.URL.Query().Get("next")
	if !localPath(next) {
		next = "/"
	}
	if s.o.Insecure {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	s.render(w, r, "login", "Log in", "", loginView{Next: next})
}

// login checks the token and sets the session cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if !sameOrigin(r) {
		s.problem(w, r, http.StatusForbidden, "cross-site request refused")
		return
	}
	next := r.PostFormValue("next")
	if !localPath(next) {
		next = "/"
	}
	secret := strings.TrimSpace(r.PostFormValue("token"))
	if secret == "" || len(secret) > maxTokenLen {
		s.renderStatus(w, r, http.StatusUnauthorized, "login", "Log in", "", loginView{Next: next, Message: "Enter an API token."})
		return
	}
	t, err := s.checkToken(r.Context(), secret)
	switch {
	case errors.Is(err, errNoSession):
		s.renderStatus(w, r, http.StatusUnauthorized, "login", "Log in", "", loginView{Next: next, Message: "Unknown or revoked token."})
		return
	case err != nil:
		s.fail(w, r, err)
		return
	case !t.Allows(ports.ScopeRead):
		s.renderStatus(w, r, http.StatusForbidden, "login", "Log in", "", loginView{Next: next, Message: "This token lacks scope read."})
		return
	}
	value, ttl, err := s.openSession(r.Context(), t)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: value, Path: "/", HttpOnly: true, MaxAge: int(ttl / time.Second),
		SameSite: http.SameSiteStrictMode, Secure: s.secureCookie(r)})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout revokes the session's token and clears the cookie.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		s.problem(w, r, http.StatusForbidden, "cross-site request refused")
		return
	}
	if sess, err := s.authenticate(r); err == nil && sess.token.ID != "" {
		if err := s.o.Tokens.TokenRevoke(r.Context(), sess.token.ID, s.o.Clock.Now()); err != nil {
			s.fail(w, r, fmt.Errorf("console logout: revoke session token %s: %w", sess.token.ID, err))
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: s.secureCookie(r)})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// SameOrigin reports whether r comes from this site (Sec-Fetch-Site and
// Origin): what the console's forms require, exported for serve's
// --insecure-no-auth guard.
func SameOrigin(r *http.Request) bool { return sameOrigin(r) }
