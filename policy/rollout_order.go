package policy

import (
	"slices"
	"sort"
	"sync"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// RolloutOrder memoizes the gradual rollout's order over one list of
// targets (Input.DeploymentTargets), per version: each target's position
// (RolloutPosition) is then a binary search, so positioning every target of
// an environment of n targets costs O(n log n), not O(n²). An order is
// shared by the inputs that list the same targets (the chain keeps one per
// scope while its targets do not change) and is safe for concurrent
// evaluations. It keeps the orders of the rolloutOrderVersions versions
// built last. It answers only for the very slice it was built from; an
// input listing another falls back to RolloutPosition.
type RolloutOrder struct {
	targets []release.ReleaseTarget

	mu        sync.Mutex
	byVersion map[string]map[scopeKey]*rolloutGroup
	built     []string // the versions of byVersion, oldest first
}

// rolloutOrderVersions is how many versions' orders a RolloutOrder keeps:
// a rollout positions its targets for a few versions at a time, and an
// order kept for long would otherwise hold one per version ever released.
const rolloutOrderVersions = 8

// scopeKey is a deployment and environment: the targets a position counts.
type scopeKey struct{ deployment, environment string }

// rolloutGroup is one scope's targets in rollout order for a version, and
// how often each is listed.
type rolloutGroup struct {
	entries []rolloutEntry
	listed  map[string]int // by resource id
}

// rolloutEntry is a listed target and its rollout hash.
type rolloutEntry struct {
	h      uint64
	target release.ReleaseTarget
}

// NewRolloutOrder is the order over targets (kept, not copied: they must
// not change afterwards).
func NewRolloutOrder(targets []release.ReleaseTarget) *RolloutOrder {
	return &RolloutOrder{targets: targets, byVersion: map[string]map[scopeKey]*rolloutGroup{}}
}

// position is RolloutPosition(target, versionID, targets) for the targets
// o was built from: ok is false for any other slice.
func (o *RolloutOrder) position(target release.ReleaseTarget, versionID string, targets []release.ReleaseTarget) (pos, n int, ok bool) {
	if o == nil || len(targets) != len(o.targets) || (len(targets) > 0 && &targets[0] != &o.targets[0]) {
		return 0, 0, false
	}
	g := o.group(versionID, scopeKey{target.DeploymentID, target.EnvironmentID})
	h := RolloutHash(target, versionID)
	pos = sort.Search(len(g.entries), func(i int) bool {
		e := g.entries[i]
		return !(e.h < h || (e.h == h && e.target.ResourceID < target.ResourceID))
	})
	return pos, 1 + len(g.entries) - g.listed[target.ResourceID], true
}

// group is the scope's targets in version's rollout order, built once.
func (o *RolloutOrder) group(versionID string, scope scopeKey) *rolloutGroup {
	o.mu.Lock()
	defer o.mu.Unlock()
	groups, ok := o.byVersion[versionID]
	if !ok {
		groups = map[scopeKey]*rolloutGroup{}
		for _, t := range o.targets {
			k := scopeKey{t.DeploymentID, t.EnvironmentID}
			g := groups[k]
			if g == nil {
				g = &rolloutGroup{listed: map[string]int{}}
				groups[k] = g
			}
			g.entries = append(g.entries, rolloutEntry{h: RolloutHash(t, versionID), target: t})
			g.listed[t.ResourceID]++
		}
		for _, g := range groups {
			slices.SortFunc(g.entries, func(a, b rolloutEntry) int {
				switch {
				case a.h < b.h:
					return -1
				case a.h > b.h:
					return 1
				case a.target.ResourceID < b.target.ResourceID:
					return -1
				case a.target.ResourceID > b.target.ResourceID:
					return 1
				}
				return 0
			})
		}
		if len(o.built) == rolloutOrderVersions {
			delete(o.byVersion, o.built[0])
			o.built = o.built[1:]
		}
		o.byVersion[versionID] = groups
		o.built = append(o.built, versionID)
	}
	if g := groups[scope]; g != nil {
		return g
	}
	return &rolloutGroup{}
}
