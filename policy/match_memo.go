package policy

import (
	"sync"

	"github.com/reconcilerhq/reconciler/expr"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// MatchMemo memoizes policy selector matches over the inputs of a batch of
// decisions, which read their subjects together: within it, one id names
// one object, so a selector's result depends only on its source and the
// ids of the subjects it reads (expr.Program.Reads). A selector that reads
// only the environment, as most do, is then evaluated once per
// environment, not once per target and candidate version. It changes no
// result, is never recorded, and is safe for concurrent evaluations. Its
// inputs must not name two different objects by one id.
type MatchMemo struct {
	mu sync.Mutex
	m  map[matchKey]matchResult
}

// NewMatchMemo is an empty memo.
func NewMatchMemo() *MatchMemo { return &MatchMemo{m: map[matchKey]matchResult{}} }

// matchKey is a selector and the ids of the subjects it reads ("" for one
// it does not read).
type matchKey struct {
	selector                                   string
	deployment, environment, resource, version string
}

// matchResult is a selector's evaluation.
type matchResult struct {
	ok  bool
	err error
}

// eval is prg's boolean value over cx's target, memoized in m when m is
// not nil.
func (m *MatchMemo) eval(prg *expr.Program, cx *evalContext) (bool, error) {
	if m == nil {
		return prg.EvalBool(cx.targetVars())
	}
	in := cx.in
	k := matchKey{selector: prg.Source()}
	if prg.Reads(release.VarDeployment) {
		k.deployment = "d:" + in.Deployment.ID
	}
	if prg.Reads(release.VarEnvironment) {
		k.environment = "e:" + in.Environment.ID
	}
	if prg.Reads(release.VarResource) {
		k.resource = "r:" + in.Resource.ID
	}
	if prg.Reads(release.VarVersion) {
		k.version = "v:" + in.Version.ID
	}
	m.mu.Lock()
	r, ok := m.m[k]
	m.mu.Unlock()
	if ok {
		return r.ok, r.err
	}
	r.ok, r.err = prg.EvalBool(cx.targetVars())
	m.mu.Lock()
	m.m[k] = r
	m.mu.Unlock()
	return r.ok, r.err
}
