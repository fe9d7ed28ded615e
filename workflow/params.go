package workflow

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"reflect"
)

// Redacted replaces a sensitive value in every stored or logged copy.
const Redacted = "[REDACTED]"

// SecretValue marks a sensitive value (a secret deployment variable, a
// token). Interpolation unwraps it for the dispatch copy of a resolved
// config and replaces it with Redacted in the stored copy. Its String,
// GoString, MarshalJSON and LogValue all print Redacted, so a SecretValue
// that reaches a log or a JSON column never leaks.
type SecretValue struct {
	Value any
}

// String returns Redacted.
func (SecretValue) String() string { return Redacted }

// GoString returns Redacted, so %#v does not leak either.
func (SecretValue) GoString() string { return Redacted }

// MarshalJSON writes Redacted.
func (SecretValue) MarshalJSON() ([]byte, error) { return json.Marshal(Redacted) }

// LogValue makes slog print Redacted.
func (SecretValue) LogValue() slog.Value { return slog.StringValue(Redacted) }

// Sources are the places a value parameter can come from, highest priority
// first: Explicit (given when the workflow was created), VersionConfig (the
// release version's config), DeploymentVariables (resolved for the
// environment). The template default comes last. Any value may be a
// SecretValue.
type Sources struct {
	Explicit            map[string]any
	VersionConfig       map[string]any
	DeploymentVariables map[string]any
}

// ResolveParameters picks each value parameter's value from the sources in
// priority order, type-checks and enum-checks it, and reports every problem:
// a wrong type, a value outside the enum, a missing required parameter, an
// explicit value for an undeclared or matrix parameter. Matrix parameters are
// left to ExpandMatrix. Numbers come out as int64 when integral, else
// float64; SecretValue wrappers are kept.
func ResolveParameters(defs []Parameter, src Sources) (map[string]any, []Problem) {
	out := make(map[string]any, len(defs))
	var ps problems
	declared := make(map[string]*Parameter, len(defs))
	for i := range defs {
		declared[defs[i].Name] = &defs[i]
	}
	for _, k := range sortedKeys(src.Explicit) {
		d, ok := declared[k]
		switch {
		case !ok:
			ps.add(joinPath("parameters", k), "not declared by the template")
		case d.Type == TypeMatrix:
			ps.add(joinPath("parameters", k), "is a matrix parameter; its items come from its source")
		}
	}
	for i := range defs {
		d := &defs[i]
		if d.Type == TypeMatrix {
			continue
		}
		path := joinPath("parameters", d.Name)
		v, from := pick(d, src)
		if from == "" {
			if d.Required {
				ps.add(path, "required parameter %q has no value (explicit, version config, deployment variable or default)", d.Name)
			}
			continue
		}
		if d.Required && v == "" {
			ps.add(path, "required parameter %q is empty (%s value)", d.Name, from)
			continue
		}
		nv, err := checkParamValue(d, v)
		if err != nil {
			ps.add(path, "%s value: %v", from, err)
			continue
		}
		out[d.Name] = nv
	}
	return out, ps.list
}

// pick returns the highest-priority value for d and the name of its source.
func pick(d *Parameter, src Sources) (any, string) {
	for _, s := range []struct {
		m    map[string]any
		name string
	}{{src.Explicit, "explicit"}, {src.VersionConfig, "version config"}, {src.DeploymentVariables, "deployment variable"}} {
		if v, ok := s.m[d.Name]; ok && v != nil {
			return v, s.name
		}
	}
	if d.Default != nil {
		return d.Default, "default"
	}
	return nil, ""
}

// checkParamValue type-checks and enum-checks v against d and returns it
// normalized, keeping a SecretValue wrapper.
func checkParamValue(d *Parameter, v any) (any, error) {
	secret, isSecret := v.(SecretValue)
	if isSecret {
		v = secret.Value
	}
	nv, err := checkType(d.Type, v)
	if err != nil {
		return nil, err
	}
	if len(d.Enum) > 0 && !inEnum(nv, d.Enum) {
		if isSecret { // never echo a secret
			return nil, fmt.Errorf("the secret value is not one of %s", display(d.Enum))
		}
		return nil, fmt.Errorf("%s is not one of %s", display(nv), display(d.Enum))
	}
	if isSecret {
		return SecretValue{Value: nv}, nil
	}
	return nv, nil
}

// checkType verifies v has the parameter type t and returns it normalized.
func checkType(t ParamType, v any) (any, error) {
	nv := Normalize(v)
	ok := false
	switch t {
	case TypeString:
		_, ok = nv.(string)
	case TypeNumber:
		switch nv.(type) {
		case int64, float64:
			ok = true
		}
	case TypeBoolean:
		_, ok = nv.(bool)
	case TypeObject:
		_, ok = nv.(map[string]any)
	case TypeArray:
		_, ok = nv.([]any)
	default:
		return nil, fmt.Errorf("parameter type %q holds no value", t)
	}
	if !ok {
		return nil, fmt.Errorf("want %s, got %s", typeWord(t), jsonKind(nv))
	}
	return nv, nil
}

func typeWord(t ParamType) string {
	switch t {
	case TypeString:
		return "a string"
	case TypeNumber:
		return "a number"
	case TypeBoolean:
		return "a boolean"
	case TypeObject:
		return "an object"
	case TypeArray:
		return "an array"
	}
	return string(t)
}

// Normalize converts a JSON-like Go value to the forms interpolation and CEL
// use: integral numbers become int64, other numbers float64, typed slices
// and maps become []any and map[string]any. SecretValue is kept.
func Normalize(v any) any {
	switch x := v.(type) {
	case nil, string, bool, int64, SecretValue:
		return v
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
		return x
	case float32:
		return Normalize(float64(x))
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case uint:
		return int64(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = Normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Normalize(e)
		}
		return out
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = Normalize(rv.Index(i).Interface())
		}
		return out
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return v
		}
		out := make(map[string]any, rv.Len())
		for _, k := range rv.MapKeys() {
			out[k.String()] = Normalize(rv.MapIndex(k).Interface())
		}
		return out
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int()
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int64(rv.Uint())
	}
	return v
}

// inEnum reports whether v equals one of the (normalized) enum values.
func inEnum(v any, enum []any) bool {
	for _, e := range enum {
		if reflect.DeepEqual(v, Normalize(e)) {
			return true
		}
	}
	return false
}

// display renders a value compactly for messages.
func display(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
