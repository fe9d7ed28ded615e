package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/ports"
)

// Security scheme names in the OpenAPI document, and operation metadata.
const (
	securityBearer    = "bearer"
	securitySignature = "signature"
	metaScope         = "scope"
	metaSigned        = "signed"
)

// tokenPrefix starts every token secret, so a leaked one is recognisable.
const tokenPrefix = "rcn_"

// Principal is who a request acts as: the token's name, or the job agent
// that signed a report.
type Principal struct {
	// Name is recorded on what the request does (approvals, force-deploys,
	// cancellations, catalog approvals).
	Name string
	// Token is the token used; zero for a signed report.
	Token ports.Token
	// Signed is set for a report whose signature the handler still has to
	// check (it needs the body).
	Signed bool
	// method and path are a signed request's, which its signature covers.
	method, path string
}

type principalKey struct{}

// principal is the request's authenticated principal.
func principal(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}

// HashSecret is how a token secret is stored: its SHA-256. Secrets are 32
// random bytes, so a fast hash is enough.
func HashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// TokenOption tunes a token IssueToken creates.
type TokenOption func(*ports.Token)

// ExpiresAt makes the token stop being accepted at t (401 from then on).
func ExpiresAt(t time.Time) TokenOption { return func(tok *ports.Token) { tok.ExpiresAt = t } }

// ForAgents binds a token of scope agent to the job agents ids: it takes,
// heartbeats and reports only their jobs (ports.Token.Agents).
func ForAgents(ids ...string) TokenOption {
	return func(tok *ports.Token) { tok.Agents = append([]string(nil), ids...) }
}

// IssueToken creates a token named name with scopes and returns it with
// its secret, which is shown once and never stored.
func IssueToken(ctx context.Context, tokens ports.Tokens, clock ports.Clock, name string, scopes []ports.Scope, opts ...TokenOption) (ports.Token, string, error) {
	id := make([]byte, 6)
	key := make([]byte, 32)
	if _, err := rand.Read(id); err != nil {
		return ports.Token{}, "", fmt.Errorf("issue token: %w", err)
	}
	if _, err := rand.Read(key); err != nil {
		return ports.Token{}, "", fmt.Errorf("issue token: %w", err)
	}
	t := ports.Token{ID: hex.EncodeToString(id), Name: name, Scopes: scopes, CreatedAt: ports.StoredTime(clock.Now())}
	for _, o := range opts {
		o(&t)
	}
	secret := tokenPrefix + t.ID + "_" + base64.RawURLEncoding.EncodeToString(key)
	if err := tokens.TokenCreate(ctx, t, HashSecret(secret)); err != nil {
		return ports.Token{}, "", fmt.Errorf("issue token: %w", err)
	}
	return t, secret, nil
}

// authenticate is the middleware of every operation: it checks the bearer
// token against the operation's scope, or lets a signed report through to
// its handler, and puts the Principal in the context.
func (s *Server) authenticate(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	if stream, _ := op.Metadata[metaStream].(bool); op.Method == http.MethodGet && s.o.ReadWait > 0 && !stream {
		// Reads draw from the store's read lane and wait at most ReadWait
		// for it, connections included; past it they answer 503 (fail). A
		// stream bounds each of its reads instead (readContext).
		rctx, cancel := context.WithTimeout(ports.WithLane(ctx.Context(), ports.LaneRead), s.o.ReadWait)
		defer cancel()
		ctx = huma.WithContext(ctx, rctx)
	}
	scope, _ := op.Metadata[metaScope].(ports.Scope)
	auth := ctx.Header("Authorization")
	if signed, _ := op.Metadata[metaSigned].(bool); signed && auth == "" && ctx.Header(SignatureHeader) != "" && !s.o.Insecure {
		u := ctx.URL()
		next(huma.WithValue(ctx, principalKey{}, Principal{Signed: true, method: ctx.Method(), path: u.EscapedPath()}))
		return
	}
	p, status, msg := s.principalOf(ctx.Context(), auth, scope)
	if status != 0 {
		if status == http.StatusUnauthorized {
			ctx.SetHeader("WWW-Authenticate", `Bearer realm="reconciler"`)
		}
		_ = huma.WriteErr(s.api, ctx, status, msg)
		return
	}
	next(huma.WithValue(ctx, principalKey{}, p))
}

// principalOf checks an Authorization header for scope; a non-zero status
// is the refusal with its message.
func (s *Server) principalOf(ctx context.Context, auth string, scope ports.Scope) (Principal, int, string) {
	if s.o.Insecure {
		name := s.o.InsecurePrincipal
		if name == "" {
			name = "anonymous"
		}
		return Principal{Name: name, Token: ports.Token{Name: name, Scopes: []ports.Scope{ports.ScopeAdmin}}}, 0, ""
	}
	secret, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || secret == "" {
		return Principal{}, http.StatusUnauthorized, "missing bearer token: send Authorization: Bearer TOKEN"
	}
	t, err := LookupToken(ctx, s.o.Tokens, secret, s.o.Clock.Now())
	var bad *BadTokenError
	switch {
	case errors.As(err, &bad):
		return Principal{}, http.StatusUnauthorized, bad.Reason
	case err != nil:
		s.o.Logger.ErrorContext(ctx, "api.auth", "error", err)
		return Principal{}, http.StatusInternalServerError, "internal error"
	case scope != "" && !t.Allows(scope):
		return Principal{}, http.StatusForbidden, "token " + t.ID + " lacks scope " + string(scope)
	}
	return Principal{Name: t.Name, Token: t}, 0, ""
}

// BadTokenError is a secret that names no valid token; Reason says why
// ("unknown token", "token ID was revoked", "token ID expired at T; ...").
type BadTokenError struct {
	Reason string
}

func (e *BadTokenError) Error() string { return e.Reason }

// LookupToken finds the valid token whose secret is secret: one that is
// unknown or no longer valid (revoked, or expired at now) is a
// *BadTokenError; any other error is the store's. The API checks bearer
// tokens with it and the console its sessions, so both accept exactly the
// same tokens.
func LookupToken(ctx context.Context, tokens ports.Tokens, secret string, now time.Time) (ports.Token, error) {
	t, err := tokens.TokenByHash(ctx, HashSecret(secret))
	switch {
	case errors.Is(err, ports.ErrNotFound):
		return ports.Token{}, &BadTokenError{Reason: "unknown token"}
	case err != nil:
		return ports.Token{}, fmt.Errorf("look up token: %w", err)
	case t.Revoked():
		return ports.Token{}, &BadTokenError{Reason: "token " + t.ID + " was revoked"}
	case t.Expired(now):
		return ports.Token{}, &BadTokenError{Reason: "token " + t.ID + " expired at " + t.ExpiresAt.UTC().Format(time.RFC3339) + "; create a new one (reconciler token create)"}
	}
	return t, nil
}
