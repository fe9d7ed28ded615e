package plan

import (
	"cmp"
	"slices"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Desired is a target's desired release as the chain decides it: the
// release and its version, or none (ReleaseID empty), and how it was
// chosen (newest-allowed, force-deploy, rollback, no-release).
type Desired struct {
	ReleaseID string   `json:"release_id,omitempty"`
	VersionID string   `json:"version_id,omitempty"`
	Tag       string   `json:"tag,omitempty"`
	How       string   `json:"how,omitempty"`
	Reasons   []string `json:"reasons,omitempty"`
}

// DesiredChange is a target's desired release before and after a change;
// Before is nil for a target never decided (or created by the change),
// After nil for a target the change removes.
type DesiredChange struct {
	Before *Desired `json:"before,omitempty"`
	After  *Desired `json:"after,omitempty"`
}

// Changed reports whether the change moves the target to another release,
// or makes or removes its decision.
func (c *DesiredChange) Changed() bool {
	if (c.Before == nil) != (c.After == nil) {
		return true
	}
	b, a := "", ""
	if c.Before != nil {
		b = c.Before.ReleaseID
	}
	if c.After != nil {
		a = c.After.ReleaseID
	}
	return b != a
}

// WithDesired adds to d the desired-release changes by target key: a
// target already in d gets its change; another target whose release
// changes is added (neither created nor removed, no rule starting or
// stopping). A change that keeps the release is kept only on a target d
// already lists. Targets stay sorted by key.
func (d *Diff) WithDesired(changes map[string]DesiredChange, targets map[string]release.ReleaseTarget) {
	seen := make(map[string]bool, len(d.Targets))
	for i := range d.Targets {
		t := &d.Targets[i]
		seen[t.Key] = true
		if c, ok := changes[t.Key]; ok {
			t.Desired = &c
		}
	}
	for k, c := range changes {
		if seen[k] || !c.Changed() {
			continue
		}
		d.Targets = append(d.Targets, Target{Target: targets[k], Key: k, Desired: &c})
	}
	slices.SortFunc(d.Targets, func(x, y Target) int { return cmp.Compare(x.Key, y.Key) })
}
