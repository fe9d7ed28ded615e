package simulated

import (
	"context"
	"sync"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// AgentRuntime is a ports.AgentRuntime that only records launches and
// releases, once per idempotency key. It starts no pods: tests, and a daemon
// with no real runtime, observe what would have been launched.
type AgentRuntime struct {
	mu       sync.Mutex
	seen     map[string]bool
	launches []ports.AgentLaunchParams
	releases []reconcile.RunRef
}

// NewAgentRuntime returns an empty recorder.
func NewAgentRuntime() *AgentRuntime { return &AgentRuntime{seen: map[string]bool{}} }

// AgentLaunch records the launch unless its key was seen before.
func (a *AgentRuntime) AgentLaunch(_ context.Context, p ports.AgentLaunchParams) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen[p.IdempotencyKey] {
		return nil
	}
	a.seen[p.IdempotencyKey] = true
	a.launches = append(a.launches, p)
	return nil
}

// AgentRelease records the release unless its key was seen before.
func (a *AgentRuntime) AgentRelease(_ context.Context, ref reconcile.RunRef, key string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen[key] {
		return nil
	}
	a.seen[key] = true
	a.releases = append(a.releases, ref)
	return nil
}

// Launches returns a copy of the recorded launches.
func (a *AgentRuntime) Launches() []ports.AgentLaunchParams {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]ports.AgentLaunchParams(nil), a.launches...)
}

// Releases returns a copy of the recorded releases.
func (a *AgentRuntime) Releases() []reconcile.RunRef {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]reconcile.RunRef(nil), a.releases...)
}

// CodeHost is a ports.CodeHost that only records merges and review
// submissions, once per idempotency key; no pull request is touched.
type CodeHost struct {
	mu      sync.Mutex
	seen    map[string]bool
	merges  []ports.PRMergeParams
	reviews []ports.PRSubmitParams
}

// NewCodeHost returns an empty recorder.
func NewCodeHost() *CodeHost { return &CodeHost{seen: map[string]bool{}} }

// PRMerge records the merge unless its key was seen before.
func (c *CodeHost) PRMerge(_ context.Context, p ports.PRMergeParams) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.seen[p.IdempotencyKey] {
		c.seen[p.IdempotencyKey] = true
		c.merges = append(c.merges, p)
	}
	return nil
}

// PRSubmitReview records the submission unless its key was seen before.
func (c *CodeHost) PRSubmitReview(_ context.Context, p ports.PRSubmitParams) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.seen[p.IdempotencyKey] {
		c.seen[p.IdempotencyKey] = true
		c.reviews = append(c.reviews, p)
	}
	return nil
}

// Merges returns a copy of the recorded merges.
func (c *CodeHost) Merges() []ports.PRMergeParams {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]ports.PRMergeParams(nil), c.merges...)
}

// Reviews returns a copy of the recorded review submissions.
func (c *CodeHost) Reviews() []ports.PRSubmitParams {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]ports.PRSubmitParams(nil), c.reviews...)
}
