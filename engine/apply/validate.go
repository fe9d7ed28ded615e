package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// validate checks what one document alone cannot tell (each document was
// validated as it was decoded): references resolve once the Apply is done,
// job agents' configs match their type, and environment progressions form
// no cycle.
func (w *world) validate(ctx context.Context, objs []*object) error {
	for _, o := range objs {
		if err := w.references(ctx, o); err != nil {
			return docError(o.index, err)
		}
	}
	if err := w.agentConfigs(ctx, objs); err != nil {
		return err
	}
	return w.progressionCycles(ctx, objs)
}

// agentConfigs checks every job agent the documents hold against its type
// alone, then, for every deployment naming a job agent where the documents
// hold either, the agent's config merged with the deployment's
// job_agent_config (CheckDeploymentAgent). A refusal names the document
// the bad key comes from: the deployment's spec.job_agent_config.KEY or
// the agent's spec.config.KEY (spec.type for an unknown type).
func (w *world) agentConfigs(ctx context.Context, objs []*object) error {
	if w.a.AgentConfig == nil {
		return nil
	}
	for _, o := range objs {
		if a, ok := o.value.(*release.JobAgent); ok {
			if err := CheckJobAgent(w.a.AgentConfig, a); err != nil {
				return docError(o.index, specField(err))
			}
		}
	}
	deps, err := afterApply[release.Deployment](ctx, w, "Deployment", objs)
	if err != nil {
		return err
	}
	agents, err := afterApply[release.JobAgent](ctx, w, "JobAgent", objs)
	if err != nil {
		return err
	}
	byID := map[string]*release.JobAgent{}
	for _, a := range agents {
		byID[a.ID] = a
	}
	for _, d := range deps {
		a := byID[d.JobAgentID]
		if a == nil {
			continue
		}
		depDoc, depIn := w.input[key{"Deployment", d.ID}]
		agentDoc, agentIn := w.input[key{"JobAgent", a.ID}]
		if !depIn && !agentIn {
			continue
		}
		fromAgent, err := CheckDeploymentAgent(w.a.AgentConfig, a, d)
		if err == nil {
			continue
		}
		if depIn && (!fromAgent || !agentIn) {
			var fe *release.FieldError
			if fromAgent && errors.As(err, &fe) {
				err = release.Invalid(release.Field("job_agent_config", strings.TrimPrefix(strings.TrimPrefix(fe.Field, "config"), ".")), fe.Msg)
			}
			return docError(depDoc.index, specField(err))
		}
		return docError(agentDoc.index, specField(err))
	}
	return nil
}

// specField moves a field error's field under "spec.", where a document
// holds an object's body.
func specField(err error) error {
	var fe *release.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	return release.Invalid(release.Field("spec", fe.Field), fe.Msg)
}

// references checks that o's parent, and a deployment's job agent, exist
// once the Apply is done.
func (w *world) references(ctx context.Context, o *object) error {
	type ref struct{ field, kind, id string }
	var refs []ref
	switch o.kind.parentMeta {
	case "workspace":
		refs = append(refs, ref{"metadata.workspace", "Workspace", o.parent})
	case "system":
		refs = append(refs, ref{"metadata.system", "System", o.parent})
	}
	if d, ok := o.value.(*release.Deployment); ok && d.JobAgentID != "" {
		refs = append(refs, ref{"spec.job_agent_id", "JobAgent", d.JobAgentID})
	}
	for _, r := range refs {
		ok, err := w.exists(ctx, key{r.kind, r.id})
		if err != nil {
			return err
		}
		if !ok {
			what := "neither stored nor in the documents"
			if w.pruned[key{r.kind, r.id}] {
				what = "pruned by this apply"
			}
			return release.Invalid(r.field, fmt.Sprintf("%s %q does not exist (%s)", kindOf(r.kind).name, r.id, what))
		}
	}
	return nil
}

// progressionCycles refuses environment progressions that wait on each
// other: within a system, an environment of a policy's workspace matched by
// its selector depends on the environments its environmentProgression rules
// select, and a cycle would leave every target of it pending forever. It reads the
// environments and policies as they will be once the Apply is done. A
// selector that cannot be told from the environment alone (it reads the
// resource, say) adds no dependency.
func (w *world) progressionCycles(ctx context.Context, objs []*object) error {
	envs, err := afterApply[release.Environment](ctx, w, "Environment", objs)
	if err != nil {
		return err
	}
	pols, err := afterApply[policy.Policy](ctx, w, "Policy", objs)
	if err != nil {
		return err
	}
	systems, err := afterApply[release.System](ctx, w, "System", objs)
	if err != nil {
		return err
	}
	workspaceOf := map[string]string{} // system id -> workspace id
	for _, s := range systems {
		workspaceOf[s.ID] = s.WorkspaceID
	}
	type edge struct {
		to     string
		policy string
		rule   int
	}
	deps := map[string][]edge{} // environment id -> upstream environments
	bySystem := map[string][]*release.Environment{}
	for _, e := range envs {
		bySystem[e.SystemID] = append(bySystem[e.SystemID], e)
	}
	match := func(sel string, e *release.Environment) bool {
		if sel == "" {
			return true
		}
		ok, err := release.CEL{}.Match(sel, &release.Subject{Environment: e})
		return err == nil && ok
	}
	for _, p := range pols {
		if !p.Enabled {
			continue
		}
		for ri, r := range p.Rules {
			prog, ok := r.Spec.(policy.EnvironmentProgression)
			if !ok {
				continue
			}
			for _, e := range envs {
				if workspaceOf[e.SystemID] != p.WorkspaceID || !match(p.Selector, e) {
					continue
				}
				for _, u := range bySystem[e.SystemID] {
					if u.ID != e.ID && match(prog.DependsOnEnvironmentSelector, u) {
						deps[e.ID] = append(deps[e.ID], edge{u.ID, p.ID, ri})
					}
				}
			}
		}
	}
	// Depth-first search for a cycle, from environments in id order.
	ids := make([]string, 0, len(envs))
	for _, e := range envs {
		ids = append(ids, e.ID)
	}
	slices.Sort(ids)
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var via []edge
	var cycle []string
	var cycleEdges []edge
	var visit func(id string) bool
	visit = func(id string) bool {
		state[id] = onPath
		path = append(path, id)
		for _, e := range deps[id] {
			switch state[e.to] {
			case onPath:
				i := slices.Index(path, e.to)
				cycle = append(slices.Clone(path[i:]), e.to)
				cycleEdges = append(slices.Clone(via[i:]), e)
				return true
			case unseen:
				via = append(via, e)
				if visit(e.to) {
					return true
				}
				via = via[:len(via)-1]
			}
		}
		path = path[:len(path)-1]
		state[id] = done
		return false
	}
	for _, id := range ids {
		if state[id] == unseen && visit(id) {
			break
		}
	}
	if cycle == nil {
		return nil
	}
	msg := "environment progressions form a cycle: " + strings.Join(cycle, " waits for ") +
		"; every target of these environments would stay pending"
	// Name the first policy of the cycle that the documents hold, at its rule.
	for _, e := range cycleEdges {
		if o, ok := w.input[key{"Policy", e.policy}]; ok {
			return docError(o.index, release.Invalid(release.Field(release.Index("spec.rules", e.rule), "depends_on_environment_selector"), msg))
		}
	}
	for _, id := range cycle {
		if o, ok := w.input[key{"Environment", id}]; ok {
			return docError(o.index, release.Invalid("metadata.name", msg))
		}
	}
	return release.Invalid("documents", msg)
}

// afterApply lists the objects of kind as they will be once the Apply is
// done: stored ones not pruned nor replaced, and the documents'.
func afterApply[T any](ctx context.Context, w *world, kind string, objs []*object) ([]*T, error) {
	k := kindOf(kind)
	all, err := k.list(ctx, w.a, "")
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", k.name, err)
	}
	var out []*T
	for _, s := range all {
		if !w.named(key{kind, s.id}) && !w.pruned[key{kind, s.id}] {
			v, ok := s.value.(*T)
			if !ok {
				return nil, errors.New("apply: kind " + kind + " holds another type")
			}
			out = append(out, v)
		}
	}
	for _, o := range objs {
		if o.kind == k {
			out = append(out, o.value.(*T))
		}
	}
	return out, nil
}
