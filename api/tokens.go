package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/ports"
)

// MaxTokenLifetime bounds a token's expires_in (as token create --expires).
const MaxTokenLifetime = 10 * 365 * 24 * time.Hour

// TokenCreate is the body of a token creation.
type TokenCreate struct {
	Name      string        `json:"name" minLength:"1" maxLength:"200" doc:"whose token: recorded as the author of what it does"`
	Scopes    []ports.Scope `json:"scopes" minItems:"1" maxItems:"5" doc:"read, write, approve, agent or admin (admin grants every scope)"`
	ExpiresIn string        `json:"expires_in,omitempty" doc:"Go duration after which the token is refused (401), e.g. 720h; at most 10 years (default: valid until revoked)"`
	Agents    []string      `json:"agents,omitempty" maxItems:"100" doc:"the job agent ids a token of scope agent acts for (required with scope agent, refused otherwise): it takes, heartbeats and reports only their jobs"`
}

// TokenCreated is a new token with its secret, which is shown this once
// and never stored.
type TokenCreated struct {
	Token  ports.Token `json:"token"`
	Secret string      `json:"secret" doc:"the bearer token; only its hash is stored"`
}

// TokenPath names a token in a path.
type TokenPath struct {
	ID string `path:"id" doc:"token id"`
}

func (s *Server) registerTokens() {
	huma.Register(s.api, s.created(s.op("createToken", http.MethodPost, "/tokens", "Create an API token; its secret is in this answer only", ports.ScopeAdmin, "tokens")),
		func(ctx context.Context, in *struct{ Body TokenCreate }) (*body[TokenCreated], error) {
			var opts []TokenOption
			if in.Body.ExpiresIn != "" {
				d, err := time.ParseDuration(in.Body.ExpiresIn)
				if err != nil || d <= 0 || d > MaxTokenLifetime {
					return nil, invalid("body.expires_in", "want a positive duration of at most 87600h such as 720h, got "+in.Body.ExpiresIn)
				}
				opts = append(opts, ExpiresAt(s.o.Clock.Now().Add(d)))
			}
			if len(in.Body.Agents) > 0 {
				opts = append(opts, ForAgents(in.Body.Agents...))
			}
			// The store refuses an unknown scope, an agent token without
			// job agents or a control character, naming the field.
			t, secret, err := IssueToken(ctx, s.o.Tokens, s.o.Clock, in.Body.Name, in.Body.Scopes, opts...)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			noteAudit(ctx, fmt.Sprintf("created token %s (%s) with scopes %v%s", t.ID, t.Name, t.Scopes, agentsNote(t.Agents)))
			return reply(TokenCreated{Token: t, Secret: secret}), nil
		})
	huma.Register(s.api, s.op("listTokens", http.MethodGet, "/tokens", "List API tokens by id, revoked and expired ones included (never a secret or its hash)", ports.ScopeAdmin, "tokens"),
		func(ctx context.Context, _ *struct{}) (*body[[]ports.Token], error) {
			list, err := s.o.Tokens.TokenList(ctx)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			if list == nil {
				list = []ports.Token{}
			}
			return reply(list), nil
		})
	huma.Register(s.api, s.noContent(s.op("revokeToken", http.MethodDelete, "/tokens/{id}", "Revoke an API token: every later request with it is refused (401); revoking again keeps the first time", ports.ScopeAdmin, "tokens")),
		func(ctx context.Context, in *TokenPath) (*struct{}, error) {
			if err := s.o.Tokens.TokenRevoke(ctx, in.ID, s.o.Clock.Now()); err != nil {
				return nil, s.fail(ctx, err)
			}
			return nil, nil
		})
}

// agentsNote renders a token's job agents for the audit log ("" for none).
func agentsNote(agents []string) string {
	if len(agents) == 0 {
		return ""
	}
	return fmt.Sprintf(" for job agents %v", agents)
}
