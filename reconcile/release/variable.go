package release

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// DeploymentVariable is a per-target value of a deployment: the value of the
// highest-priority entry of Values whose selector matches the target, else
// Default.
type DeploymentVariable struct {
	Key         string          `json:"key"`
	Description string          `json:"description,omitempty"`
	Values      []VariableValue `json:"values,omitempty"`
	Default     *Value          `json:"default,omitempty"`
}

// VariableValue is one candidate value of a deployment variable.
type VariableValue struct {
	// Selector is a CEL expression over resource, environment and
	// deployment; empty matches nothing (write "true" for everything).
	Selector string `json:"selector,omitempty"`
	// Priority orders candidates: the highest matching one wins; equal
	// priorities keep list order.
	Priority int   `json:"priority"`
	Value    Value `json:"value"`
}

// ValueKind says which arm of a Value is set.
type ValueKind string

// The value kinds.
const (
	ValueLiteral   ValueKind = "literal"
	ValueReference ValueKind = "reference"
	ValueSensitive ValueKind = "sensitive"
)

// Value is a tagged union: a literal JSON value, a reference to a related
// resource's field, or a sensitive value. At most one arm is set; none set
// means the literal null. Encoded as {"literal": v}, {"reference": {...}} or
// {"sensitive": {...}}.
type Value struct {
	Literal   any        `json:"literal,omitempty"`
	Reference *Reference `json:"reference,omitempty"`
	Sensitive *SecretRef `json:"sensitive,omitempty"`
}

// Reference points at a field of a resource related to the target's
// resource: Relation names the relationship, Path the field inside the
// related resource (e.g. ["metadata", "region"]).
type Reference struct {
	Relation string   `json:"relation"`
	Path     []string `json:"path"`
}

// Kind reports which arm is set.
func (v Value) Kind() ValueKind {
	switch {
	case v.Sensitive != nil:
		return ValueSensitive
	case v.Reference != nil:
		return ValueReference
	}
	return ValueLiteral
}

func (v Value) validate(path string) error {
	n := 0
	if v.Literal != nil {
		n++
	}
	if v.Reference != nil {
		n++
		if v.Reference.Relation == "" {
			return Invalid(Field(path, "reference.relation"), "is required")
		}
		if len(v.Reference.Path) == 0 {
			return Invalid(Field(path, "reference.path"), "is required")
		}
	}
	if v.Sensitive != nil {
		n++
		if err := v.Sensitive.validate(Field(path, "sensitive")); err != nil {
			return err
		}
	}
	if n > 1 {
		return Invalid(path, "set only one of literal, reference and sensitive")
	}
	return nil
}

// Validate reports the first invalid field.
func (v *DeploymentVariable) Validate() error { return v.validate("") }

func (v *DeploymentVariable) validate(path string) error {
	if err := checkRequired(Field(path, "key"), v.Key); err != nil {
		return err
	}
	for i := range v.Values {
		p := Index(Field(path, "values"), i)
		if err := CheckSelector(Field(p, "selector"), v.Values[i].Selector, true); err != nil {
			return err
		}
		if err := v.Values[i].Value.validate(Field(p, "value")); err != nil {
			return err
		}
	}
	if v.Default != nil {
		return v.Default.validate(Field(path, "default"))
	}
	return nil
}

// Resolve picks the variable's value for subject s: the highest-priority
// value whose selector matches (list order among equals), else the default.
// ok is false when neither applies. A selector that fails to evaluate does
// not match; the first such error is returned alongside the result.
func (v *DeploymentVariable) Resolve(s *Subject, sel Selector) (val Value, ok bool, err error) {
	val, ok, err = v.resolveValues(s, sel)
	if !ok && v.Default != nil {
		return *v.Default, true, err
	}
	return val, ok, err
}

// resolveValues is Resolve without the default.
func (v *DeploymentVariable) resolveValues(s *Subject, sel Selector) (val Value, ok bool, err error) {
	best := -1
	for i := range v.Values {
		if best >= 0 && v.Values[i].Priority <= v.Values[best].Priority {
			continue
		}
		m, e := sel.Match(v.Values[i].Selector, s)
		if e != nil {
			if err == nil {
				err = e
			}
			continue
		}
		if m {
			best = i
		}
	}
	if best >= 0 {
		return v.Values[best].Value, true, err
	}
	return Value{}, false, err
}

// UnmarshalJSON decodes a value strictly (unknown fields are refused) and
// keeps integral literal numbers exact: they decode as int64 when they fit,
// other numbers as float64.
func (v *Value) UnmarshalJSON(b []byte) error {
	type plain Value
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return err
	}
	p.Literal = exactNumbers(p.Literal)
	*v = Value(p)
	return nil
}

// exactNumbers replaces every json.Number in v by an int64 when it is an
// integer that fits, else by a float64.
func exactNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, _ := strconv.ParseFloat(string(x), 64)
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = exactNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = exactNumbers(e)
		}
	}
	return v
}

// VariableSet is a named group of variable values of a system, applied to
// the targets its selector matches. It is an object of its own, stored
// under its system.
type VariableSet struct {
	ID       string `json:"id"`
	SystemID string `json:"system_id"`
	Name     string `json:"name"`
	// Selector is a CEL expression over resource, environment and
	// deployment; empty matches every target.
	Selector string `json:"selector,omitempty"`
	// Priority orders sets: among matching sets that hold a key, the
	// highest wins; equal priorities keep id order.
	Priority int              `json:"priority"`
	Values   map[string]Value `json:"values"`
}

// Validate reports the first invalid field.
func (v *VariableSet) Validate() error {
	if err := v.validateFields(); err != nil {
		return err
	}
	return CheckText(v)
}

func (v *VariableSet) validateFields() error {
	if err := CheckObjectID("id", v.ID); err != nil {
		return err
	}
	if err := checkID("system_id", v.SystemID); err != nil {
		return err
	}
	if err := checkRequired("name", v.Name); err != nil {
		return err
	}
	if err := CheckSelector("selector", v.Selector, true); err != nil {
		return err
	}
	for _, k := range sortedKeys(v.Values) {
		if err := v.Values[k].validate(Field("values", k)); err != nil {
			return err
		}
	}
	return nil
}

// VariableSource names where a resolved variable came from.
type VariableSource string

// The variable sources, in the order ResolveVariables consults them.
const (
	SourceResource    VariableSource = "resource"
	SourceDeployment  VariableSource = "deployment"
	SourceVariableSet VariableSource = "variable-set"
	SourceDefault     VariableSource = "default"
)

// ResolveVariables resolves each variable the deployment declares for
// subject s (its Deployment, Environment and Resource must be set), the
// first source that has it winning:
//
//  1. the resource's own value (Resource.Variables[key]);
//  2. the deployment variable's highest-priority value whose selector
//     matches;
//  3. the highest-priority matching set of sets (the variable sets of the
//     deployment's system, in id order) that holds the key;
//  4. the deployment variable's default.
//
// A variable none of them has is left out. Values are returned as stored:
// a sensitive value stays a SecretRef (ciphertext or reference, never
// plain text) and a reference stays a reference. The sources say where
// each came from. A selector that fails to evaluate is invalid input
// naming its field.
func ResolveVariables(s *Subject, sets []VariableSet, sel Selector) (map[string]Value, map[string]VariableSource, error) {
	dep := s.Deployment
	if len(dep.Variables) == 0 {
		return nil, nil, nil
	}
	vals := make(map[string]Value, len(dep.Variables))
	srcs := make(map[string]VariableSource, len(dep.Variables))
	var matching []int // matching variable sets, best first
	setsDone := false
	for i := range dep.Variables {
		v := &dep.Variables[i]
		if val, ok := s.Resource.Variables[v.Key]; ok {
			vals[v.Key], srcs[v.Key] = val, SourceResource
			continue
		}
		if val, ok, err := v.resolveValues(s, sel); err != nil {
			return nil, nil, Invalid(Field(Index("variables", i), "values"), err.Error())
		} else if ok {
			vals[v.Key], srcs[v.Key] = val, SourceDeployment
			continue
		}
		if !setsDone {
			var err error
			if matching, err = matchingSets(sets, s, sel); err != nil {
				return nil, nil, err
			}
			setsDone = true
		}
		found := false
		for _, si := range matching {
			if val, ok := sets[si].Values[v.Key]; ok {
				vals[v.Key], srcs[v.Key], found = val, SourceVariableSet, true
				break
			}
		}
		if !found && v.Default != nil {
			vals[v.Key], srcs[v.Key] = *v.Default, SourceDefault
		}
	}
	return vals, srcs, nil
}

// matchingSets lists the indexes of the sets whose selector matches s,
// highest priority first (list order among equals). A failing selector is
// invalid input naming the set.
func matchingSets(sets []VariableSet, s *Subject, sel Selector) ([]int, error) {
	var out []int
	for i := range sets {
		vs := &sets[i]
		if vs.Selector != "" {
			m, err := sel.Match(vs.Selector, s)
			if err != nil {
				return nil, Invalid(Field("variable_set "+vs.ID, "selector"), err.Error())
			}
			if !m {
				continue
			}
		}
		j := len(out)
		out = append(out, i)
		for ; j > 0 && sets[out[j-1]].Priority < vs.Priority; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}
