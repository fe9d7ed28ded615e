package memory

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/reconcilerhq/reconciler/internal/strictjson"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// The release store normalises every value on write by a JSON round trip,
// so maps of `any` hold exactly what Postgres's jsonb hands back (float64
// numbers, int64 literals in variable values), and copies on read
// structurally, which is cheap enough for the hot paths (version streams,
// target reads, job history).

// jsonRoundTrip returns v encoded and decoded again: a deep copy in the
// types a JSON document reads back as.
func jsonRoundTrip[T any](v *T) (T, error) {
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		return out, fmt.Errorf("encode: %w", err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("decode: %w", err)
	}
	return out, nil
}

// copyValue deep-copies a variable value.
func copyValue(v release.Value) release.Value {
	out := release.Value{Literal: strictjson.Clone(v.Literal)}
	if v.Reference != nil {
		out.Reference = &release.Reference{Relation: v.Reference.Relation, Path: slices.Clone(v.Reference.Path)}
	}
	if v.Sensitive != nil {
		s := *v.Sensitive
		out.Sensitive = &s
	}
	return out
}

func copyWorkspace(w *release.Workspace) release.Workspace { return *w }

func copySystem(s *release.System) release.System { return *s }

func copyRelationshipRule(r *release.RelationshipRule) release.RelationshipRule { return *r }

func copyVariableSet(v *release.VariableSet) release.VariableSet {
	out := *v
	out.Values = copyValues(v.Values)
	return out
}

// copyValues deep-copies a map of variable values.
func copyValues(m map[string]release.Value) map[string]release.Value {
	if m == nil {
		return nil
	}
	out := make(map[string]release.Value, len(m))
	for k, v := range m {
		out[k] = copyValue(v)
	}
	return out
}

func copyDeployment(d *release.Deployment) release.Deployment {
	out := *d
	out.JobAgentConfig = strictjson.CloneObject(d.JobAgentConfig)
	out.Metadata = maps.Clone(d.Metadata)
	if d.Variables != nil {
		out.Variables = make([]release.DeploymentVariable, len(d.Variables))
		for i, v := range d.Variables {
			c := v
			if v.Values != nil {
				c.Values = make([]release.VariableValue, len(v.Values))
				for j, vv := range v.Values {
					c.Values[j] = release.VariableValue{Selector: vv.Selector, Priority: vv.Priority, Value: copyValue(vv.Value)}
				}
			}
			if v.Default != nil {
				def := copyValue(*v.Default)
				c.Default = &def
			}
			out.Variables[i] = c
		}
	}
	if d.WorkflowTemplate != nil {
		w := *d.WorkflowTemplate
		out.WorkflowTemplate = &w
	}
	return out
}

func copyEnvironment(e *release.Environment) release.Environment {
	out := *e
	out.Metadata = maps.Clone(e.Metadata)
	return out
}

func copyResource(r *release.Resource) release.Resource {
	out := *r
	out.Config = strictjson.CloneObject(r.Config)
	out.Metadata = maps.Clone(r.Metadata)
	out.Variables = copyValues(r.Variables)
	return out
}

func copyJobAgent(a *release.JobAgent) release.JobAgent {
	out := *a
	out.Config = strictjson.CloneObject(a.Config)
	return out
}

func copyVersion(v *release.DeploymentVersion) release.DeploymentVersion {
	out := *v
	out.Config = strictjson.CloneObject(v.Config)
	out.JobAgentConfig = strictjson.CloneObject(v.JobAgentConfig)
	out.Metadata = maps.Clone(v.Metadata)
	return out
}

func copyRelease(r *release.Release) release.Release {
	out := *r
	if r.Variables != nil {
		out.Variables = make(map[string]release.Value, len(r.Variables))
		for k, v := range r.Variables {
			out.Variables[k] = copyValue(v)
		}
	}
	out.Policies = slices.Clone(r.Policies)
	return out
}

func copyJob(j *ports.JobRow) ports.JobRow {
	out := *j
	out.JobAgentConfig = strictjson.CloneObject(j.JobAgentConfig)
	out.DispatchContext = strictjson.CloneObject(j.DispatchContext)
	if j.Take != nil {
		take := *j.Take
		out.Take = &take
	}
	if j.Measurements != nil {
		out.Measurements = make(map[string][]release.Measurement, len(j.Measurements))
		for k, ms := range j.Measurements {
			cp := make([]release.Measurement, len(ms))
			for i, m := range ms {
				cp[i] = m
				cp[i].Result = strictjson.Clone(m.Result)
			}
			out.Measurements[k] = cp
		}
	}
	return out
}

func copyDesired(d *ports.DesiredRelease) ports.DesiredRelease {
	out := *d
	out.Reasons = slices.Clone(d.Reasons)
	return out
}
