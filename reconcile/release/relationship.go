package release

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/reconcilerhq/reconciler/expr"
	"github.com/reconcilerhq/reconciler/internal/strictjson"
)

// The CEL variables of a relationship rule's match: the resource a
// reference is resolved from (the target's resource) and a candidate
// related resource.
const (
	VarFrom = "from"
	VarTo   = "to"
)

// RelationEnv is the CEL environment of a relationship rule's match: from
// and to are declared, each with the fields of the resource as the CEL
// variable `resource` (from.metadata.vpc, to.kind, to.id).
var RelationEnv = expr.MustEnv(VarFrom, VarTo)

// RelationshipRule relates the resources of a workspace: the target's
// resource (from) is related, under the rule's Name, to the resources (to)
// Match holds for. A deployment variable of kind reference names the
// relation ({reference: {relation: NAME, path: [...]}}) and resolves to the
// related resource's field at the path (ResolveReferences).
type RelationshipRule struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id"`
	// Name is the reference name variables use, e.g. "vpc"; several rules
	// may share one.
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// FromSelector and ToSelector are CEL expressions over `resource` that
	// the from and the to resource must match; empty matches every
	// resource.
	FromSelector string `json:"from_selector,omitempty"`
	ToSelector   string `json:"to_selector,omitempty"`
	// Match is a CEL expression over from and to, e.g.
	// `from.metadata.vpc == to.id && to.kind == "VPC"`.
	Match string `json:"match"`
}

// Validate reports the first invalid field.
func (r *RelationshipRule) Validate() error {
	if err := r.validateFields(); err != nil {
		return err
	}
	return CheckText(r)
}

func (r *RelationshipRule) validateFields() error {
	if err := CheckObjectID("id", r.ID); err != nil {
		return err
	}
	if err := checkID("workspace_id", r.WorkspaceID); err != nil {
		return err
	}
	if err := CheckObjectID("name", r.Name); err != nil {
		return err
	}
	if err := CheckSelector("from_selector", r.FromSelector, true); err != nil {
		return err
	}
	if err := CheckSelector("to_selector", r.ToSelector, true); err != nil {
		return err
	}
	if r.Match == "" {
		return Invalid("match", "is required")
	}
	if err := CheckExpr(RelationEnv, "match", r.Match); err != nil {
		return err
	}
	if p, err := RelationEnv.Compile(r.Match); err == nil && !p.MayBeBool() {
		return Invalid("match", "invalid CEL: a match must be a boolean expression; this one is of type "+p.ResultType())
	}
	return nil
}

// relates reports whether the rule relates from to to: both in the rule's
// workspace, not the same resource, both selectors and the match hold. An
// expression that fails to evaluate (e.g. from.metadata lacks the key it
// reads) does not match, as a selector does not.
func (r *RelationshipRule) relates(from, to *Resource, fromVars map[string]any) bool {
	if to.ID == from.ID || to.WorkspaceID != r.WorkspaceID || from.WorkspaceID != r.WorkspaceID {
		return false
	}
	if r.ToSelector != "" {
		if ok, err := (CEL{}).Match(r.ToSelector, &Subject{Resource: to}); err != nil || !ok {
			return false
		}
	}
	p, err := RelationEnv.Compile(r.Match)
	if err != nil {
		return false
	}
	ok, err := p.EvalBool(map[string]any{VarFrom: fromVars, VarTo: to.CELValue()})
	return err == nil && ok
}

// appliesFrom reports whether the rule's from selector holds for from.
func (r *RelationshipRule) appliesFrom(from *Resource) bool {
	if from.WorkspaceID != r.WorkspaceID {
		return false
	}
	if r.FromSelector == "" {
		return true
	}
	ok, err := (CEL{}).Match(r.FromSelector, &Subject{Resource: from})
	return err == nil && ok
}

// Related finds the resource related to from under the relation name: of
// the rules named name (by id), the first whose from selector holds for
// from and that relates from to a candidate; of that rule's related
// candidates, the one of the smallest id. The answer depends only on the
// sets of rules and candidates, never on their order. ok is false when no
// rule relates from to any candidate.
func Related(name string, from *Resource, rules []RelationshipRule, candidates []Resource) (rule *RelationshipRule, to *Resource, ok bool) {
	ri := sortedIdx(len(rules), func(i int) string { return rules[i].ID })
	ci := sortedIdx(len(candidates), func(i int) string { return candidates[i].ID })
	var fromVars map[string]any
	for _, i := range ri {
		r := &rules[i]
		if r.Name != name || !r.appliesFrom(from) {
			continue
		}
		if fromVars == nil {
			fromVars = from.CELValue()
		}
		for _, j := range ci {
			if r.relates(from, &candidates[j], fromVars) {
				return r, &candidates[j], true
			}
		}
	}
	return nil, nil, false
}

// sortedIdx returns 0..n-1 ordered by key (stable among equal keys, so
// duplicates keep their first occurrence first).
func sortedIdx(n int, key func(int) string) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(key(a), key(b)) })
	return idx
}

// Relation is how one reference variable was resolved: the relation and
// path it names, the rule and the related resource used, or why it stays
// unresolved.
type Relation struct {
	// Variable is the deployment variable's key.
	Variable string `json:"variable"`
	// Reference is the relation name the variable names, Path the field.
	Reference string   `json:"reference"`
	Path      []string `json:"path"`
	// Rule is the id of the relationship rule used and ResourceID the
	// related resource's id; empty when no rule relates the resource.
	Rule       string `json:"rule,omitempty"`
	ResourceID string `json:"resource_id,omitempty"`
	// Unresolved says why the variable has no value ("" when it has one);
	// an unresolved variable is left out of the release.
	Unresolved string `json:"unresolved,omitempty"`
}

// ResolveReferences replaces every reference value of vals by the field at
// its path of the resource related to from (Related): a literal of that
// field's value. A reference without a related resource, or whose path
// names no field of it, is removed from vals (the variable is unresolved).
// It returns the resolved values (vals itself is not changed) and one
// Relation per reference, in variable key order.
func ResolveReferences(vals map[string]Value, from *Resource, rules []RelationshipRule, candidates []Resource) (map[string]Value, []Relation) {
	var out map[string]Value
	var rels []Relation
	for _, k := range sortedKeys(vals) {
		v := vals[k]
		if v.Reference == nil {
			continue
		}
		if out == nil {
			out = make(map[string]Value, len(vals))
			for k2, v2 := range vals {
				out[k2] = v2
			}
		}
		ref := v.Reference
		rel := Relation{Variable: k, Reference: ref.Relation, Path: slices.Clone(ref.Path)}
		delete(out, k)
		r, to, ok := Related(ref.Relation, from, rules, candidates)
		switch {
		case !ok:
			rel.Unresolved = "no resource is related to " + from.ID + " as " + strconv.Quote(ref.Relation)
		default:
			rel.Rule, rel.ResourceID = r.ID, to.ID
			if field, found := fieldAt(to.CELValue(), ref.Path); found {
				out[k] = Value{Literal: field}
			} else {
				rel.Unresolved = "resource " + to.ID + " has no field " + strconv.Quote(pathString(ref.Path))
			}
		}
		rels = append(rels, rel)
	}
	if out == nil {
		return vals, nil
	}
	return out, rels
}

// fieldAt walks path through maps from doc; found is false when a step is
// missing or not a map, or the value found is null.
func fieldAt(doc any, path []string) (any, bool) {
	cur := doc
	for _, p := range path {
		switch m := cur.(type) {
		case map[string]any:
			v, ok := m[p]
			if !ok {
				return nil, false
			}
			cur = v
		case map[string]string:
			v, ok := m[p]
			if !ok {
				return nil, false
			}
			cur = v
		default:
			return nil, false
		}
	}
	if cur == nil {
		return nil, false
	}
	return deepCopy(cur), true
}

// pathString renders a path as a.b.c.
func pathString(path []string) string { return strings.Join(path, ".") }

// deepCopy copies the maps and lists of a JSON-like value, so a literal
// never shares them with the resource it was read from; a map[string]string
// (metadata) becomes a JSON object.
func deepCopy(v any) any {
	if x, ok := v.(map[string]string); ok {
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = e
		}
		return out
	}
	return strictjson.Clone(v)
}
