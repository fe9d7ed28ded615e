package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/reconcilerhq/reconciler/policy"
	decision "github.com/reconcilerhq/reconciler/policy/plan"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// MaxDocuments caps the documents of one Apply.
const MaxDocuments = 1000

// Effects is what a write sets off in the release chain (engine/chain's
// Chain): target recomputation of a system, and re-evaluation of targets.
type Effects interface {
	SyncTargets(ctx context.Context, systemID string) (ports.TargetsDiff, error)
	EvaluateTargets(ctx context.Context, targets ...release.ReleaseTarget) error
}

// AgentConfigValidator checks a job agent's config against its type's
// schema; it returns nil for a type it does not know, and a
// *release.FieldError naming the config key ("config.delay") otherwise.
type AgentConfigValidator func(agentType string, config map[string]any) error

// Applier applies documents to a release store.
type Applier struct {
	Store ports.ReleaseStore
	// Tx makes one Apply (or Delete) all or nothing.
	Tx ports.Transactor
	// Effects, when set, recomputes the targets of the systems a write
	// touched and re-evaluates every target after a policy changed.
	Effects Effects
	// Policies is where policies are read and written, the one policy
	// path: the catalog's view (engine/catalog's Service.Policies, which
	// publishes a revision approved by its caller). Nil: no policy is
	// stored and a Policy document is refused.
	Policies ports.Objects[policy.Policy]
	// AgentConfig, when set, checks every job agent's config.
	AgentConfig AgentConfigValidator
}

// policies is the policy path.
func (a *Applier) policies() ports.Objects[policy.Policy] {
	if a.Policies != nil {
		return a.Policies
	}
	return noPolicies{}
}

// noPolicies is the policy path of an Applier without one: nothing is
// stored, nothing can be written.
type noPolicies struct{}

var errNoPolicies = errors.New("apply: no policy store configured (Applier.Policies)")

func (noPolicies) Get(context.Context, string) (ports.Stored[policy.Policy], error) {
	return ports.Stored[policy.Policy]{}, ports.ErrNotFound
}

func (noPolicies) List(context.Context, ports.ListParams) (ports.Page[policy.Policy], error) {
	return ports.Page[policy.Policy]{}, nil
}

func (noPolicies) Put(context.Context, policy.Policy, int64) (int64, error) { return 0, errNoPolicies }

func (noPolicies) Delete(context.Context, string, int64) error { return errNoPolicies }

// Request is one Apply.
type Request struct {
	Documents []Document `json:"documents" maxItems:"1000" doc:"the objects, each once per kind and name"`
	// DryRun computes and checks everything, reports it, and writes nothing.
	DryRun bool `json:"dry_run,omitempty" doc:"report what would change and write nothing"`
	// Prune deletes the systems, variable sets, resources, relationship
	// rules, environments, deployments and policies of Workspace whose
	// kind the documents hold but whose name they do not.
	Prune bool `json:"prune,omitempty" doc:"delete the objects of the documents' kinds (systems, variable sets, resources, relationship rules, environments, deployments, policies) in the workspace that the documents no longer name"`
	// Workspace is the one workspace Prune may touch; empty: the one
	// workspace the documents name.
	Workspace string `json:"workspace,omitempty" doc:"with prune: the workspace it acts in; default: the one workspace the documents name"`
	// CallerRollsBack, on a dry run made inside a transaction that its
	// caller rolls back (gate.Check's), leaves the dry run's writes in that
	// transaction for the caller to read instead of rolling them back
	// itself (a nested transaction that fails is rolled back on its own).
	CallerRollsBack bool `json:"-"`
}

// Action is what Apply did (or, on a dry run, would do) to an object.
type Action string

// The actions.
const (
	Created   Action = "created"
	Changed   Action = "changed"
	Unchanged Action = "unchanged"
	Deleted   Action = "deleted"
)

// Result is one object's outcome.
type Result struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Action Action `json:"action" enum:"created,changed,unchanged,deleted"`
	// Changes lists a changed object's fields: "spec.f: OLD -> NEW".
	Changes []string `json:"changes,omitempty"`
}

// Response is what Apply did, one result per object in kind order (parents
// first), then name.
type Response struct {
	DryRun  bool     `json:"dry_run,omitempty"`
	Results []Result `json:"results"`
	// Plan is, on a dry run through a caller that computes it (the API),
	// what the change would do to each affected release target.
	Plan *decision.Diff `json:"plan,omitempty"`
	// PlanSummary counts the whole plan when Plan is one page of it.
	PlanSummary *decision.Summary `json:"plan_summary,omitempty"`
	// PlanNextCursor continues the plan: post the same request with it as
	// cursor for the next page ("" on the last page).
	PlanNextCursor string `json:"plan_next_cursor,omitempty"`
	// Warnings name what was accepted but should change (a deprecated
	// apiVersion), each with the document it is in.
	Warnings []string `json:"warnings,omitempty"`
}

// errDryRun rolls a dry run's transaction back.
var errDryRun = errors.New("dry run")

// docError places a problem of document i: its Field gains the prefix
// "documents[i].".
func docError(i int, err error) error {
	var fe *release.FieldError
	if errors.As(err, &fe) {
		c := *fe
		c.Field = release.Field(release.Index("documents", i), fe.Field)
		return &c
	}
	return release.Invalid(release.Index("documents", i), err.Error())
}

// plan is one object's planned write.
type plan struct {
	obj     *object
	action  Action
	version int64
	changes []string
	// before is the stored parent, when the object moved.
	oldParent string
}

// Apply makes the store match the documents, all or nothing: every object
// is created or updated by kind and name (an unchanged one is not
// written), and with Prune the workspace's objects of the documents' kinds
// that they no longer name are deleted. Bad input changes nothing and is a
// *release.FieldError naming "documents[i].FIELD"; a conflict (a write
// raced, an object still in use) is ports.ErrConflict.
func (a *Applier) Apply(ctx context.Context, req Request) (Response, error) {
	if len(req.Documents) > MaxDocuments {
		return Response{}, release.Invalid("documents", fmt.Sprintf("at most %d documents, got %d", MaxDocuments, len(req.Documents)))
	}
	objs := make([]*object, 0, len(req.Documents))
	seen := map[key]int{}
	var warnings []string
	for i := range req.Documents {
		if req.Documents[i].APIVersion == DeprecatedAPIVersion {
			warnings = append(warnings, fmt.Sprintf("%s.apiVersion: %s is deprecated; use %s",
				release.Index("documents", i), DeprecatedAPIVersion, APIVersion))
		}
		o, err := decodeDocument(&req.Documents[i])
		if err != nil {
			return Response{}, docError(i, err)
		}
		o.index = i
		if j, dup := seen[o.key()]; dup {
			return Response{}, docError(i, release.Invalid("metadata.name", fmt.Sprintf("%s %q is also documents[%d]", o.kind.Kind, o.id, j)))
		}
		seen[o.key()] = i
		objs = append(objs, o)
	}
	sortObjects(objs, func(o **object) *kindDef { return (*o).kind }, func(o **object) string { return (*o).id })
	ws, err := pruneWorkspace(req, objs)
	if err != nil {
		return Response{}, err
	}
	var resp Response
	err = a.Tx.InTx(ctx, func(ctx context.Context) error {
		w := &world{a: a, input: map[key]*object{}, pruned: map[key]bool{}}
		for _, o := range objs {
			w.input[o.key()] = o
		}
		plans, err := w.plan(ctx, objs)
		if err != nil {
			return err
		}
		var deletes []stored
		var delKinds []*kindDef
		if req.Prune {
			if deletes, delKinds, err = w.prunable(ctx, ws, objs); err != nil {
				return err
			}
		}
		if err := w.validate(ctx, objs); err != nil {
			return err
		}
		resp = response(plans, deletes, delKinds, req.DryRun)
		if err := w.write(ctx, plans, deletes, delKinds, !req.DryRun); err != nil {
			return err
		}
		if req.DryRun && !req.CallerRollsBack {
			return errDryRun
		}
		return nil
	})
	if err != nil && !errors.Is(err, errDryRun) {
		return Response{}, err
	}
	resp.Warnings = warnings
	return resp, nil
}

// pruneWorkspace is the workspace Prune acts in: the request's, else the
// one the documents name.
func pruneWorkspace(req Request, objs []*object) (string, error) {
	if !req.Prune {
		if req.Workspace != "" {
			return "", release.Invalid("workspace", "is only for prune")
		}
		return "", nil
	}
	if req.Workspace != "" {
		return req.Workspace, nil
	}
	var named []string
	for _, o := range objs {
		switch {
		case o.kind.Kind == "Workspace":
			named = append(named, o.id)
		case o.kind.parentMeta == "workspace":
			named = append(named, o.parent)
		}
	}
	slices.Sort(named)
	named = slices.Compact(named)
	if len(named) != 1 {
		return "", release.Invalid("workspace", fmt.Sprintf("prune needs the workspace it acts in: the documents name %d workspaces (%s); give one", len(named), strings.Join(named, ", ")))
	}
	return named[0], nil
}

// world is one Apply's view: the input, and what prune deletes.
type world struct {
	a      *Applier
	input  map[key]*object
	pruned map[key]bool
}

// plan reads each object's stored state and decides its action.
func (w *world) plan(ctx context.Context, objs []*object) ([]plan, error) {
	plans := make([]plan, 0, len(objs))
	for _, o := range objs {
		cur, err := o.kind.get(ctx, w.a, o.id)
		switch {
		case errors.Is(err, ports.ErrNotFound):
			plans = append(plans, plan{obj: o, action: Created})
			continue
		case err != nil:
			return nil, fmt.Errorf("read %s %s: %w", o.kind.name, o.id, err)
		}
		p := plan{obj: o, action: Unchanged, version: cur.version}
		if p.changes = diff(o.kind, cur.value, o.value); len(p.changes) > 0 {
			p.action = Changed
		}
		if cur.parent != o.parent {
			if o.kind.Kind == "System" {
				// Its deployments, environments and their targets would
				// change tenant without a word (the API's PUT refuses it too).
				return nil, docError(o.index, release.Invalid("metadata.workspace",
					fmt.Sprintf("system %q is in workspace %q; apply cannot move it to %q", o.id, cur.parent, o.parent)))
			}
			p.oldParent = cur.parent
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// prunable lists the stored objects prune deletes: of the documents'
// pruned kinds, in workspace ws, not named by the documents; children
// first.
func (w *world) prunable(ctx context.Context, ws string, objs []*object) ([]stored, []*kindDef, error) {
	applied := map[*kindDef]bool{}
	for _, o := range objs {
		applied[o.kind] = true
	}
	if _, err := w.a.Store.Workspaces().Get(ctx, ws); err != nil && !w.named(key{"Workspace", ws}) {
		return nil, nil, release.Invalid("workspace", fmt.Sprintf("workspace %q: %v", ws, err))
	}
	systems, err := kindOf("System").list(ctx, w.a, ws)
	if err != nil {
		return nil, nil, err
	}
	var out []stored
	var ks []*kindDef
	add := func(k *kindDef, parent string) error {
		if !applied[k] {
			return nil
		}
		all, err := k.list(ctx, w.a, parent)
		if err != nil {
			return err
		}
		for _, s := range all {
			if !w.named(key{k.Kind, s.id}) {
				out = append(out, s)
				ks = append(ks, k)
				w.pruned[key{k.Kind, s.id}] = true
			}
		}
		return nil
	}
	for _, k := range []string{"Deployment", "Environment", "VariableSet"} {
		for _, sys := range systems {
			if err := add(kindOf(k), sys.id); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, k := range []string{"Resource", "RelationshipRule", "System", "Policy"} {
		if err := add(kindOf(k), ws); err != nil {
			return nil, nil, err
		}
	}
	return out, ks, nil
}

// named reports whether the documents name k.
func (w *world) named(k key) bool { _, ok := w.input[k]; return ok }

// exists reports whether k exists once the Apply is done: named by the
// documents, or stored and not pruned.
func (w *world) exists(ctx context.Context, k key) (bool, error) {
	if w.named(k) {
		return true, nil
	}
	if w.pruned[k] {
		return false, nil
	}
	_, err := kindOf(k.kind).get(ctx, w.a, k.id)
	if errors.Is(err, ports.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// write stores the plans (parents first), deletes the pruned objects
// (children first, their targets removed before), then, unless it is a dry
// run (effects false), publishes the policies and recomputes the targets of
// every system touched, re-evaluating every target after a policy change.
func (w *world) write(ctx context.Context, plans []plan, deletes []stored, delKinds []*kindDef, effects bool) error {
	fx := newEffects()
	put := func(p plan) error {
		o := p.obj
		if err := o.kind.put(ctx, w.a, o.value, p.version); err != nil {
			return fmt.Errorf("%s %s: %w", o.kind.name, o.id, placeStoreError(o.index, err))
		}
		fx.touch(o.kind, o.id, o.parent)
		if p.oldParent != "" {
			fx.touch(o.kind, o.id, p.oldParent)
		}
		return nil
	}
	// Policies go last, after the other deletes, and so do the deletes of
	// pruned policies: the catalog they are published to may not join the
	// transaction (it does on Postgres, not in memory), so nothing that
	// can fail comes after them but the effects, and a dry run does not
	// write them at all.
	var policies []plan
	for _, p := range plans {
		switch {
		case p.action == Unchanged:
		case p.obj.kind.Kind == "Policy":
			policies = append(policies, p)
		default:
			if err := put(p); err != nil {
				return err
			}
		}
	}
	remove := func(i int) error {
		k, s := delKinds[i], deletes[i]
		if err := w.a.remove(ctx, k, s); err != nil {
			return err
		}
		fx.touch(k, s.id, s.parent)
		return nil
	}
	var policyDeletes []int
	for i := range deletes {
		if delKinds[i].Kind == "Policy" {
			policyDeletes = append(policyDeletes, i)
			continue
		}
		if err := remove(i); err != nil {
			return err
		}
	}
	if !effects {
		return nil // a dry run
	}
	for _, p := range policies {
		if err := put(p); err != nil {
			return err
		}
	}
	for _, i := range policyDeletes {
		if err := remove(i); err != nil {
			return err
		}
	}
	for i, s := range deletes {
		if delKinds[i].Kind == "System" {
			delete(fx.sync, s.id)
			delete(fx.evaluate, s.id)
		}
	}
	if w.a.Effects == nil {
		return nil
	}
	return w.a.after(ctx, fx)
}

// effects are what writes set off: systems whose targets are recomputed,
// systems whose targets are re-evaluated (a variable set changed),
// workspaces whose resources changed, and whether a policy did.
type effects struct {
	sync, evaluate, resourceWS map[string]bool
	policy                     bool
}

func newEffects() *effects {
	return &effects{sync: map[string]bool{}, evaluate: map[string]bool{}, resourceWS: map[string]bool{}}
}

// touch records the effects of a write of a k named id under parent.
func (fx *effects) touch(k *kindDef, id, parent string) {
	switch k.Kind {
	case "System":
		fx.sync[id] = true
	case "Deployment", "Environment":
		fx.sync[parent] = true
	case "VariableSet":
		fx.evaluate[parent] = true
	case "Resource", "RelationshipRule":
		// A rule changes what reference variables resolve to in its
		// workspace, as a resource does.
		fx.resourceWS[parent] = true
	case "Policy":
		fx.policy = true
	}
}

// placeStoreError names the document of a write the store refused for bad
// input; other errors pass.
func placeStoreError(i int, err error) error {
	if errors.Is(err, release.ErrInvalid) {
		return docError(i, err)
	}
	return err
}

// remove deletes a stored object, its release targets first.
func (a *Applier) remove(ctx context.Context, k *kindDef, s stored) error {
	var scope ports.TargetScope
	switch k.Kind {
	case "Deployment":
		scope.DeploymentID = s.id
	case "Environment":
		scope.EnvironmentID = s.id
	case "Resource":
		scope.ResourceID = s.id
	}
	if !scope.IsZero() {
		if _, err := a.Store.TargetsReplace(ctx, ports.TargetsReplaceParams{Scope: scope}); err != nil {
			return fmt.Errorf("delete %s %s: remove its targets: %w", k.name, s.id, err)
		}
	}
	if err := k.del(ctx, a, s.id, s.version); err != nil {
		return fmt.Errorf("delete %s %s: %w", k.name, s.id, err)
	}
	return nil
}

// after sets off the effects of the writes: targets of the touched systems
// and of every system of the workspaces whose resources changed are
// recomputed; a variable set's system's targets are re-evaluated, and a
// policy change re-evaluates every target.
func (a *Applier) after(ctx context.Context, fx *effects) error {
	for ws := range fx.resourceWS {
		all, err := kindOf("System").list(ctx, a, ws)
		if err != nil {
			return err
		}
		for _, s := range all {
			fx.sync[s.id] = true
		}
	}
	for _, id := range slices.Sorted(maps.Keys(fx.sync)) {
		_, err := a.Effects.SyncTargets(ctx, id)
		var se *release.SelectorError
		if err != nil && !errors.As(err, &se) && !errors.Is(err, ports.ErrNotFound) {
			return fmt.Errorf("targets of system %s: %w", id, err)
		}
	}
	if fx.policy {
		return a.evaluate(ctx, ports.TargetScope{})
	}
	for _, id := range slices.Sorted(maps.Keys(fx.evaluate)) {
		if err := a.evaluate(ctx, ports.TargetScope{SystemID: id}); err != nil {
			return err
		}
	}
	return nil
}

// evaluate re-evaluates every target of scope.
func (a *Applier) evaluate(ctx context.Context, scope ports.TargetScope) error {
	after := ""
	for {
		page, err := a.Store.TargetList(ctx, ports.TargetListParams{Scope: scope, AfterKey: after, Limit: 1000})
		if err != nil {
			return err
		}
		if err := a.Effects.EvaluateTargets(ctx, page...); err != nil {
			return err
		}
		if len(page) < 1000 {
			return nil
		}
		after = page[len(page)-1].Key()
	}
}

// response renders the outcome in kind order, then name.
func response(plans []plan, deletes []stored, delKinds []*kindDef, dryRun bool) Response {
	type row struct {
		k *kindDef
		r Result
	}
	rows := make([]row, 0, len(plans)+len(deletes))
	for _, p := range plans {
		rows = append(rows, row{p.obj.kind, Result{Kind: p.obj.kind.Kind, Name: p.obj.id, Action: p.action, Changes: p.changes}})
	}
	for i, s := range deletes {
		rows = append(rows, row{delKinds[i], Result{Kind: delKinds[i].Kind, Name: s.id, Action: Deleted}})
	}
	sortObjects(rows, func(r *row) *kindDef { return r.k }, func(r *row) string { return r.r.Name })
	out := Response{DryRun: dryRun, Results: make([]Result, len(rows))}
	for i := range rows {
		out.Results[i] = rows[i].r
	}
	return out
}

// Get reads the documents of kind (any name ParseKind accepts): the one
// named name, or every one when name is empty, by name. Each is what Apply
// accepts unchanged.
func (a *Applier) Get(ctx context.Context, kind, name string) ([]Document, error) {
	k := kindOf(kind)
	if k == nil {
		_, err := ParseKind(kind)
		return nil, err
	}
	var all []stored
	if name != "" {
		s, err := k.get(ctx, a, name)
		if err != nil {
			return nil, err
		}
		all = []stored{s}
	} else {
		var err error
		if all, err = k.list(ctx, a, ""); err != nil {
			return nil, err
		}
	}
	out := make([]Document, 0, len(all))
	for _, s := range all {
		d, err := k.encode(s)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Delete removes one object with its release targets, in one transaction,
// and sets off the effects; it never cascades to children (ErrInUse, a
// conflict, while they exist).
func (a *Applier) Delete(ctx context.Context, kind, name string) error {
	k := kindOf(kind)
	if k == nil {
		_, err := ParseKind(kind)
		return err
	}
	return a.Tx.InTx(ctx, func(ctx context.Context) error {
		s, err := k.get(ctx, a, name)
		if err != nil {
			return err
		}
		if err := a.remove(ctx, k, s); err != nil {
			return err
		}
		if a.Effects == nil {
			return nil
		}
		fx := newEffects()
		fx.touch(k, s.id, s.parent)
		if k.Kind == "System" {
			delete(fx.sync, s.id) // a deleted system has no targets
		}
		return a.after(ctx, fx)
	})
}

// diff lists the fields where next differs from cur, as the document names
// them: "spec.f: OLD -> NEW" (values as JSON); nil when equal.
func diff(k *kindDef, cur, next any) []string {
	a, b := normalized(cur), normalized(next)
	if reflect.DeepEqual(a, b) {
		return nil
	}
	var out []string
	var walk func(path string, x, y any)
	walk = func(path string, x, y any) {
		xm, xok := x.(map[string]any)
		ym, yok := y.(map[string]any)
		if xok && yok {
			keys := make([]string, 0, len(xm)+len(ym))
			for k := range xm {
				keys = append(keys, k)
			}
			for k := range ym {
				if _, ok := xm[k]; !ok {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(release.Field(path, k), xm[k], ym[k])
			}
			return
		}
		if !reflect.DeepEqual(x, y) {
			out = append(out, k.docField(path)+": "+jsonText(x)+" -> "+jsonText(y))
		}
	}
	walk("", a, b)
	return out
}

// jsonText renders a JSON value on one line; absent is "(none)".
func jsonText(v any) string {
	if v == nil {
		return "(none)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// normalized is v after a JSON round trip, as a store keeps it.
func normalized(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}
