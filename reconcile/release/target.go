package release

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ReleaseTarget is one (deployment, environment, resource) triple: the unit
// the release chain reconciles.
type ReleaseTarget struct {
	DeploymentID  string `json:"deployment_id"`
	EnvironmentID string `json:"environment_id"`
	ResourceID    string `json:"resource_id"`
}

// Key is the target's stable identity: "deployment:environment:resource".
func (t ReleaseTarget) Key() string {
	return t.DeploymentID + ":" + t.EnvironmentID + ":" + t.ResourceID
}

// String returns Key.
func (t ReleaseTarget) String() string { return t.Key() }

// ParseTargetKey is the inverse of Key.
func ParseTargetKey(key string) (ReleaseTarget, error) {
	parts := strings.Split(key, ":")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return ReleaseTarget{}, fmt.Errorf("target key %q: want \"deployment:environment:resource\"", key)
	}
	return ReleaseTarget{DeploymentID: parts[0], EnvironmentID: parts[1], ResourceID: parts[2]}, nil
}

// SelectorError reports the selectors ComputeTargets could not evaluate.
// Each failed (selector, resource) pair counted as no match.
type SelectorError struct {
	// Failures holds one line per failing selector, e.g.
	// "deployment d1 resource_selector on resource r7: ...". Only the
	// first failure of each selector is kept.
	Failures []string
}

// Error joins the failures.
func (e *SelectorError) Error() string {
	return "selectors failed to evaluate: " + strings.Join(e.Failures, "; ")
}

// ComputeTargets returns the release targets of the catalog, sorted by Key:
// every (deployment, environment, resource) where the deployment and the
// environment belong to the same known system, the resource belongs to that
// system's workspace, and the resource matches both the deployment's and the
// environment's resource selector (an empty selector matches nothing).
//
// A selector that fails to evaluate for a resource does not match it; the
// targets are still returned, with a *SelectorError naming the failing
// selectors.
func ComputeTargets(systems []System, deployments []Deployment, environments []Environment, resources []Resource, sel Selector) ([]ReleaseTarget, error) {
	if sel == nil {
		return nil, errors.New("compute targets: nil selector")
	}
	subjects := make([]Subject, len(resources))
	for i := range resources {
		subjects[i].Resource = &resources[i]
	}
	var failures []string
	failed := map[string]bool{}
	match := func(owner, selector string) []int {
		if selector == "" {
			return nil
		}
		var out []int
		for i := range subjects {
			ok, err := sel.Match(selector, &subjects[i])
			if err != nil {
				if !failed[owner] {
					failed[owner] = true
					failures = append(failures, fmt.Sprintf("%s on resource %s: %v", owner, resources[i].ID, err))
				}
				continue
			}
			if ok {
				out = append(out, i)
			}
		}
		return out
	}

	var targets []ReleaseTarget
	seen := map[ReleaseTarget]bool{}
	for si := range systems {
		sys := &systems[si]
		var envMatches [][]bool
		var envs []*Environment
		for ei := range environments {
			e := &environments[ei]
			if e.SystemID != sys.ID {
				continue
			}
			mask := make([]bool, len(resources))
			for _, i := range match("environment "+e.ID+" resource_selector", e.ResourceSelector) {
				mask[i] = resources[i].WorkspaceID == sys.WorkspaceID
			}
			envs = append(envs, e)
			envMatches = append(envMatches, mask)
		}
		if len(envs) == 0 {
			continue
		}
		for di := range deployments {
			d := &deployments[di]
			if d.SystemID != sys.ID {
				continue
			}
			for _, ri := range match("deployment "+d.ID+" resource_selector", d.ResourceSelector) {
				for k, e := range envs {
					if !envMatches[k][ri] {
						continue
					}
					t := ReleaseTarget{DeploymentID: d.ID, EnvironmentID: e.ID, ResourceID: resources[ri].ID}
					if !seen[t] {
						seen[t] = true
						targets = append(targets, t)
					}
				}
			}
		}
	}
	sortTargets(targets)
	if len(failures) > 0 {
		return targets, &SelectorError{Failures: failures}
	}
	return targets, nil
}

// sortTargets sorts targets by Key, computing each key once.
func sortTargets(targets []ReleaseTarget) {
	keys := make([]string, len(targets))
	for i := range targets {
		keys[i] = targets[i].Key()
	}
	sort.Sort(byKey{keys, targets})
}

type byKey struct {
	keys    []string
	targets []ReleaseTarget
}

func (b byKey) Len() int           { return len(b.keys) }
func (b byKey) Less(i, j int) bool { return b.keys[i] < b.keys[j] }
func (b byKey) Swap(i, j int) {
	b.keys[i], b.keys[j] = b.keys[j], b.keys[i]
	b.targets[i], b.targets[j] = b.targets[j], b.targets[i]
}
