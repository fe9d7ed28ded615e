package workflow

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// Selector picks resources or environments for a matrix source. It is either
// a CEL expression over the candidate (`resource.kind == "Kubernetes"`) or a
// structured Condition, which CEL translates into the same kind of
// expression.
type Selector struct {
	// Expr is the CEL source when the selector was written as a string.
	Expr string
	// Condition is the structured form when the selector was an object.
	Condition *Condition
}

// Condition is the structured selector form:
//
//	{type: kind|name|identifier, operator: OP, value: V}
//	{type: metadata, key: K, operator: OP, value: V}
//	{type: comparison, operator: and|or, conditions: [...]}
//
// where OP is equals, not-equals, contains, starts-with, ends-with or regex.
// Not negates the condition.
type Condition struct {
	// Type is kind, name, identifier, metadata or comparison.
	Type string `json:"type"`
	// Key is the metadata key a metadata condition reads.
	Key string `json:"key,omitempty"`
	// Operator is equals, not-equals, contains, starts-with, ends-with or
	// regex; and or or for a comparison.
	Operator string `json:"operator"`
	// Value is what the field is compared with.
	Value string `json:"value,omitempty"`
	// Not negates the condition.
	Not bool `json:"not,omitempty"`
	// Conditions are a comparison's operands.
	Conditions []Condition `json:"conditions,omitempty"`
}

// The structured condition types and operators.
const (
	CondKind       = "kind"
	CondName       = "name"
	CondIdentifier = "identifier"
	CondMetadata   = "metadata"
	CondComparison = "comparison"

	OpEquals     = "equals"
	OpNotEquals  = "not-equals"
	OpContains   = "contains"
	OpStartsWith = "starts-with"
	OpEndsWith   = "ends-with"
	OpRegex      = "regex"
	OpAnd        = "and"
	OpOr         = "or"
)

// UnmarshalJSON accepts a CEL string or a condition object. It is lenient:
// the strict decoder reports shapes that are neither.
func (s *Selector) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err == nil {
		*s = Selector{Expr: str}
		return nil
	}
	var c Condition
	if err := json.Unmarshal(b, &c); err == nil {
		*s = Selector{Condition: &c}
	}
	return nil
}

// MarshalJSON writes the selector in the form it was written.
func (s Selector) MarshalJSON() ([]byte, error) {
	if s.Condition != nil {
		return json.Marshal(s.Condition)
	}
	return json.Marshal(s.Expr)
}

func (*Selector) shape(v any) (reflect.Type, string) {
	switch v.(type) {
	case string:
		return nil, ""
	case map[string]any:
		return reflect.TypeOf(Condition{}), ""
	}
	return nil, "want a CEL string or a condition object, got " + jsonKind(v)
}

// CEL returns the selector as a CEL expression over the variable name
// ("resource" or "environment"), and the problems of a structured condition
// with paths relative to the selector.
func (s *Selector) CEL(name string) (string, []Problem) {
	if s.Condition == nil {
		return s.Expr, nil
	}
	var ps problems
	out := s.Condition.cel(name, "", &ps)
	return out, ps.list
}

func (c *Condition) cel(name, path string, ps *problems) string {
	var out string
	switch c.Type {
	case CondComparison:
		out = c.combine(name, path, ps)
	case CondKind, CondName, CondIdentifier:
		out = c.compare(field(name, c.Type), path, ps)
	case CondMetadata:
		if c.Key == "" {
			ps.add(joinPath(path, "key"), "a metadata condition needs a key")
		}
		q := strconv.Quote(c.Key)
		subject := "(has(" + name + ".metadata) && " + q + " in " + name + ".metadata ? string(" +
			name + ".metadata[" + q + "]) : \"\")"
		out = c.compare(subject, path, ps)
	case "":
		ps.add(joinPath(path, "type"), "a condition needs a type (kind, name, identifier, metadata or comparison)")
		return "false"
	default:
		ps.add(joinPath(path, "type"), "unknown condition type %q; want kind, name, identifier, metadata or comparison", c.Type)
		return "false"
	}
	if c.Not {
		return "!(" + out + ")"
	}
	return out
}

func (c *Condition) combine(name, path string, ps *problems) string {
	var join string
	switch c.Operator {
	case OpAnd:
		join = " && "
	case OpOr:
		join = " || "
	default:
		ps.add(joinPath(path, "operator"), "a comparison condition needs operator and or or, got %q", c.Operator)
		join = " && "
	}
	if len(c.Conditions) == 0 {
		ps.add(joinPath(path, "conditions"), "a comparison condition needs at least one condition")
		return "false"
	}
	parts := make([]string, len(c.Conditions))
	for i := range c.Conditions {
		parts[i] = "(" + c.Conditions[i].cel(name, indexPath(joinPath(path, "conditions"), i), ps) + ")"
	}
	return strings.Join(parts, join)
}

func (c *Condition) compare(subject, path string, ps *problems) string {
	if len(c.Conditions) > 0 {
		ps.add(joinPath(path, "conditions"), "only a comparison condition has conditions")
	}
	v := strconv.Quote(c.Value)
	switch c.Operator {
	case OpEquals:
		return subject + " == " + v
	case OpNotEquals:
		return subject + " != " + v
	case OpContains:
		return subject + ".contains(" + v + ")"
	case OpStartsWith:
		return subject + ".startsWith(" + v + ")"
	case OpEndsWith:
		return subject + ".endsWith(" + v + ")"
	case OpRegex:
		if _, err := regexp.Compile(c.Value); err != nil {
			ps.add(joinPath(path, "value"), "bad regular expression: %v", err)
			return "false"
		}
		return subject + ".matches(" + v + ")"
	case "":
		ps.add(joinPath(path, "operator"), "a condition needs an operator")
	default:
		ps.add(joinPath(path, "operator"), "unknown operator %q; want equals, not-equals, contains, starts-with, ends-with or regex", c.Operator)
	}
	return "false"
}

// field reads a string field of the candidate, "" when absent.
func field(name, key string) string {
	return "(has(" + name + "." + key + ") ? string(" + name + "." + key + ") : \"\")"
}
