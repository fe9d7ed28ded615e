package chain

import (
	"context"
	"strings"
	"sync"
)

// workspaces remembers the workspace of each deployment the chain enqueued
// work for, so each item names its workspace (ports.EnqueueParams) and a
// lease shares the chain's kinds fairly between workspaces. A deployment
// stays in its system, and a system in its workspace, so the cache never
// goes stale in a way that matters: at worst an item is leased in the wrong
// workspace's share.
type workspaces struct {
	mu   sync.Mutex
	byID map[string]string
}

// workspaceOf returns the workspace of the deployment a work item's scope
// names (release targets and environment wakes: "deployment:..."); empty,
// the shared workspace, for other scopes and when the deployment cannot be
// read (the enqueue is never failed for it).
func (c *Chain) workspaceOf(ctx context.Context, scopeType, scopeID string) string {
	if scopeType != ScopeTarget && scopeType != ScopeEnvironment {
		return ""
	}
	deployment, _, _ := strings.Cut(scopeID, ":")
	c.spaces.mu.Lock()
	ws, ok := c.spaces.byID[deployment]
	c.spaces.mu.Unlock()
	if ok {
		return ws
	}
	d, err := c.Store.Deployments().Get(ctx, deployment)
	if err != nil {
		return ""
	}
	s, err := c.Store.Systems().Get(ctx, d.Value.SystemID)
	if err != nil {
		return ""
	}
	ws = s.Value.WorkspaceID
	c.spaces.mu.Lock()
	if c.spaces.byID == nil {
		c.spaces.byID = map[string]string{}
	}
	c.spaces.byID[deployment] = ws
	c.spaces.mu.Unlock()
	return ws
}
