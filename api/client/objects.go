package client

import (
	"context"
	"net/http"
	"strconv"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Kind is a simple kind of the object store as the API serves it: the
// path segment of its routes.
type Kind[T any] struct{ path string }

// The API's simple kinds.
var (
	Workspaces   = Kind[release.Workspace]{"workspaces"}
	Systems      = Kind[release.System]{"systems"}
	Deployments  = Kind[release.Deployment]{"deployments"}
	Environments = Kind[release.Environment]{"environments"}
	Resources    = Kind[release.Resource]{"resources"}
	VariableSets = Kind[release.VariableSet]{"variable-sets"}
	JobAgents    = Kind[release.JobAgent]{"job-agents"}
	// RelationshipRules relate a workspace's resources for reference
	// variables.
	RelationshipRules = Kind[release.RelationshipRule]{"relationship-rules"}
	Policies          = Kind[policy.Policy]{"policies"}
)

// GetObject reads one object with its version.
func GetObject[T any](ctx context.Context, c *Client, k Kind[T], id string) (ports.Stored[T], error) {
	o, err := get[api.Object[T]](ctx, c, "/"+k.path+"/"+esc(id))
	return ports.Stored[T](o), err
}

// ListObjects lists a page of objects (parent "": all).
func ListObjects[T any](ctx context.Context, c *Client, k Kind[T], parent string, p Page) (api.Page[ports.Stored[T]], error) {
	pg, err := get[api.Page[api.Object[T]]](ctx, c, "/"+k.path+p.pairs("parent", parent))
	out := api.Page[ports.Stored[T]]{Items: make([]ports.Stored[T], len(pg.Items)), NextCursor: pg.NextCursor}
	for i, o := range pg.Items {
		out.Items[i] = ports.Stored[T](o)
	}
	return out, err
}

// PutObject creates or replaces an object whose id is id; version > 0
// replaces only the object stored at that version (If-Match; a stale one
// is a 412, errors.Is ports.ErrConflict), 0 whatever is stored. It returns
// the stored object.
func PutObject[T any](ctx context.Context, c *Client, k Kind[T], id string, v T, version int64) (ports.Stored[T], error) {
	var out api.Object[T]
	var h []string
	if version > 0 {
		h = []string{"If-Match", strconv.Quote(strconv.FormatInt(version, 10))}
	}
	err := c.do(ctx, http.MethodPut, "/"+k.path+"/"+esc(id), v, &out, h...)
	return ports.Stored[T](out), err
}

// DeleteObject deletes an object; version > 0 only at that version.
func DeleteObject[T any](ctx context.Context, c *Client, k Kind[T], id string, version int64) error {
	var h []string
	if version > 0 {
		h = []string{"If-Match", strconv.Quote(strconv.FormatInt(version, 10))}
	}
	return c.do(ctx, http.MethodDelete, "/"+k.path+"/"+esc(id), nil, nil, h...)
}
