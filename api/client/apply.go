package client

import (
	"context"
	"net/http"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/engine/apply"
)

// Apply applies documents (POST /apply), all or nothing.
func (c *Client) Apply(ctx context.Context, r apply.Request) (apply.Response, error) {
	return post[apply.Response](ctx, c, http.MethodPost, "/apply", r)
}

// Documents reads every object of kind as documents, by name.
func (c *Client) Documents(ctx context.Context, kind string) ([]apply.Document, error) {
	l, err := get[api.DocumentList](ctx, c, "/documents/"+esc(kind))
	return l.Items, err
}

// Document reads one object as a document.
func (c *Client) Document(ctx context.Context, kind, name string) (apply.Document, error) {
	return get[apply.Document](ctx, c, "/documents/"+esc(kind)+"/"+esc(name))
}

// DeleteDocument deletes one object with its release targets.
func (c *Client) DeleteDocument(ctx context.Context, kind, name string) error {
	return c.do(ctx, http.MethodDelete, "/documents/"+esc(kind)+"/"+esc(name), nil, nil)
}
