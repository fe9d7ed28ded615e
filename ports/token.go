package ports

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Scope is what an API token may do.
type Scope string

// The API scopes. Admin implies every other scope.
const (
	// ScopeRead reads anything.
	ScopeRead Scope = "read"
	// ScopeWrite creates and changes objects, versions, workflows and runs.
	ScopeWrite Scope = "write"
	// ScopeApprove approves versions, workflow approval tasks and catalog
	// revisions, and force-deploys.
	ScopeApprove Scope = "approve"
	// ScopeAgent reports on jobs, as a job agent does.
	ScopeAgent Scope = "agent"
	// ScopeAdmin does everything, including token and dead-letter
	// administration.
	ScopeAdmin Scope = "admin"
)

// Scopes lists every scope.
var Scopes = []Scope{ScopeRead, ScopeWrite, ScopeApprove, ScopeAgent, ScopeAdmin}

// Valid reports whether s is a known scope.
func (s Scope) Valid() bool { return slices.Contains(Scopes, s) }

// Token is an API token as stored: never its secret, only the secret's
// hash (see Tokens).
type Token struct {
	// ID identifies the token; it is part of the secret's visible prefix.
	ID string `json:"id"`
	// Name says whose token it is: the principal recorded on what the
	// token does (approvals, force-deploys, control intents).
	Name      string    `json:"name"`
	Scopes    []Scope   `json:"scopes"`
	CreatedAt time.Time `json:"created_at"`
	// RevokedAt is when the token was revoked; zero while it is valid.
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	// ExpiresAt is when the token stops being accepted; zero for never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Agents are the job agents a token of scope agent acts for: it takes,
	// heartbeats and reports only their jobs. Required with scope agent
	// (unless admin), refused otherwise.
	Agents []string `json:"agents,omitempty"`
}

// MaxTokenAgents bounds Token.Agents.
const MaxTokenAgents = 100

// ActsFor reports whether the token may act as job agent agentID: an
// admin token may, an agent token only for its Agents.
func (t *Token) ActsFor(agentID string) bool {
	if slices.Contains(t.Scopes, ScopeAdmin) {
		return true
	}
	return agentID != "" && slices.Contains(t.Scopes, ScopeAgent) && slices.Contains(t.Agents, agentID)
}

// Allows reports whether the token grants s (admin grants everything).
func (t *Token) Allows(s Scope) bool {
	return slices.Contains(t.Scopes, s) || slices.Contains(t.Scopes, ScopeAdmin)
}

// Revoked reports whether the token was revoked.
func (t *Token) Revoked() bool { return !t.RevokedAt.IsZero() }

// Expired reports whether the token has an expiry that is not after now.
func (t *Token) Expired(now time.Time) bool { return !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt) }

// ValidateToken checks a token before it is stored: an id, a name without
// control characters, at least one scope, every scope known, an expiry (if any) after its
// creation, and a hash.
func ValidateToken(t *Token, hash []byte) error {
	switch {
	case t.ID == "":
		return release.Invalid("id", "is required")
	case t.Name == "":
		return release.Invalid("name", "is required")
	case len(t.Scopes) == 0:
		return release.Invalid("scopes", "at least one scope is required")
	case len(hash) == 0:
		return release.Invalid("hash", "is required")
	case !t.ExpiresAt.IsZero() && !t.ExpiresAt.After(t.CreatedAt):
		return release.Invalid("expires_at", "must be after created_at")
	}
	if err := release.CheckControl("name", t.Name); err != nil {
		return err // the name is shown and recorded as a principal
	}
	if err := release.CheckText(t); err != nil {
		return err
	}
	for i, s := range t.Scopes {
		if !s.Valid() {
			return release.Invalid(release.Index("scopes", i), "unknown scope "+strconv.Quote(string(s))+" (want read, write, approve, agent or admin)")
		}
	}
	return validateTokenAgents(t)
}

// validateTokenAgents checks Token.Agents: named exactly when the token
// has scope agent and not admin, each a non-empty id without control
// characters, no duplicates, at most MaxTokenAgents.
func validateTokenAgents(t *Token) error {
	agent := slices.Contains(t.Scopes, ScopeAgent) && !slices.Contains(t.Scopes, ScopeAdmin)
	switch {
	case agent && len(t.Agents) == 0:
		return release.Invalid("agents", "a token of scope agent must name the job agents it acts for")
	case !agent && len(t.Agents) > 0:
		return release.Invalid("agents", "only a token of scope agent (without admin) names job agents")
	case len(t.Agents) > MaxTokenAgents:
		return release.Invalid("agents", "at most "+strconv.Itoa(MaxTokenAgents)+" job agents")
	}
	for i, a := range t.Agents {
		if a == "" {
			return release.Invalid(release.Index("agents", i), "is empty")
		}
		if err := release.CheckControl(release.Index("agents", i), a); err != nil {
			return err
		}
		if slices.Contains(t.Agents[:i], a) {
			return release.Invalid(release.Index("agents", i), "names "+strconv.Quote(a)+" twice")
		}
	}
	return nil
}

// Tokens stores API tokens by the hash of their secret, and the signatures
// already used by signed requests (replay protection).
//
// Invariants (checked by porttest.Tokens):
//   - The secret is never stored: TokenCreate takes its hash, and
//     TokenByHash finds a token only by that hash. A taken id or hash is
//     ErrConflict; bad input is a *release.FieldError.
//   - A revoked token is still found (with RevokedAt set) so callers can
//     say it was revoked; revoking twice keeps the first time; a missing
//     id is ErrNotFound.
//   - TokenList lists every token by id, revoked and expired ones included;
//     ExpiresAt is kept as given (at StoredTime precision).
//   - NonceClaim records key once until it expires: the first claim of a
//     key reports true, every later claim before expiresAt false, even
//     under concurrency. An expired key may be claimed again.
//   - Reads return copies; times are kept in UTC at microsecond precision.
type Tokens interface {
	// TokenCreate stores t under the hash of its secret.
	TokenCreate(ctx context.Context, t Token, hash []byte) error
	// TokenByHash reads the token whose secret hashes to hash.
	TokenByHash(ctx context.Context, hash []byte) (Token, error)
	// TokenList lists every token by id.
	TokenList(ctx context.Context) ([]Token, error)
	// TokenRevoke revokes a token at the given time.
	TokenRevoke(ctx context.Context, id string, at time.Time) error
	// NonceClaim claims key until expiresAt; false means it was already
	// claimed and has not expired (at now).
	NonceClaim(ctx context.Context, key string, now, expiresAt time.Time) (bool, error)
}
