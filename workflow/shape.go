package workflow

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/reconcilerhq/reconciler/reconcile"
)

var (
	typeOfTemplate = reflect.TypeOf(Template{})
	shapedType     = reflect.TypeOf((*shaped)(nil)).Elem()
	durationType   = reflect.TypeOf(reconcile.Duration(0))
)

// shaped is implemented by types that accept more than one JSON shape. shape
// reports a problem message for a value it refuses, or a type to check the
// value against instead.
type shaped interface {
	shape(v any) (walkAs reflect.Type, problem string)
}

// checkShape compares a decoded JSON tree against the Go type it will be
// decoded into and records every unknown field and wrong type with its path.
// A value whose decoding would stop encoding/json (a bad duration) is
// replaced by null in the tree, so the rest still decodes.
func checkShape(t reflect.Type, v any, path string, ps *problems) (drop bool) {
	if v == nil {
		return false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		if err := checkDuration(v); err != nil {
			ps.add(path, "%s", err)
			return true
		}
		return false
	}
	if reflect.PointerTo(t).Implements(shapedType) {
		alt, msg := reflect.New(t).Interface().(shaped).shape(v)
		if msg != "" {
			ps.add(path, "%s", msg)
		}
		if alt != nil {
			return checkShape(alt, v, path, ps)
		}
		return false
	}
	switch t.Kind() {
	case reflect.Interface:
		return false
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			ps.add(path, "want an object, got %s", jsonKind(v))
			return false
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(m) {
			ft, ok := fields[k]
			if !ok {
				ps.add(joinPath(path, k), "%s", unknownField(k, fields))
				continue
			}
			if checkShape(ft, m[k], joinPath(path, k), ps) {
				m[k] = nil
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			ps.add(path, "want an object, got %s", jsonKind(v))
			return false
		}
		for _, k := range sortedKeys(m) {
			if checkShape(t.Elem(), m[k], joinPath(path, k), ps) {
				m[k] = nil
			}
		}
	case reflect.Slice:
		l, ok := v.([]any)
		if !ok {
			ps.add(path, "want an array, got %s", jsonKind(v))
			return false
		}
		for i, item := range l {
			if checkShape(t.Elem(), item, indexPath(path, i), ps) {
				l[i] = nil
			}
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			ps.add(path, "want a string, got %s", jsonKind(v))
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			ps.add(path, "want a boolean, got %s", jsonKind(v))
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, ok := v.(json.Number)
		if !ok {
			ps.add(path, "want an integer, got %s", jsonKind(v))
			return false
		}
		if _, err := n.Int64(); err != nil {
			ps.add(path, "want an integer, got %s", n)
		}
	case reflect.Float64, reflect.Float32:
		if _, ok := v.(json.Number); !ok {
			ps.add(path, "want a number, got %s", jsonKind(v))
		}
	}
	return false
}

// checkDuration checks a decoded JSON value against reconcile.Duration: a
// number of seconds or a string ParseDuration reads.
func checkDuration(v any) error {
	switch x := v.(type) {
	case json.Number:
		_, err := reconcile.ParseDuration(x.String())
		return err
	case string:
		_, err := reconcile.ParseDuration(x)
		return err
	}
	return fmt.Errorf("want seconds or a duration like \"30s\", got %s", jsonKind(v))
}

// jsonFields maps the JSON names of a struct's exported fields to their
// types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// unknownField words the problem for a field the type does not declare,
// suggesting the closest declared name.
func unknownField(k string, fields map[string]reflect.Type) string {
	best, bestD := "", 3
	for name := range fields {
		d := editDistance(strings.ToLower(k), strings.ToLower(name))
		if d < bestD || (d == bestD && name < best) {
			best, bestD = name, d
		}
	}
	if best != "" {
		return "unknown field " + quote(k) + "; did you mean " + quote(best) + "?"
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	return "unknown field " + quote(k) + "; known fields: " + strings.Join(names, ", ")
}

func quote(s string) string { return `"` + s + `"` }

// editDistance is the Levenshtein distance between two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
