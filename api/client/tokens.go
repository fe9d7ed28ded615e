package client

import (
	"context"
	"net/http"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/ports"
)

// CreateToken creates an API token (scope admin); the answer holds its
// secret, which cannot be read again.
func (c *Client) CreateToken(ctx context.Context, t api.TokenCreate) (api.TokenCreated, error) {
	return post[api.TokenCreated](ctx, c, http.MethodPost, "/tokens", t)
}

// ListTokens lists the API tokens by id (scope admin), never their secrets.
func (c *Client) ListTokens(ctx context.Context) ([]ports.Token, error) {
	return get[[]ports.Token](ctx, c, "/tokens")
}

// RevokeToken revokes an API token (scope admin).
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/tokens/"+esc(id), nil, nil)
}
