package workflow

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// IntOrString is a non-negative integer written as a number (3) or a string
// of digits ("3"), as Argo accepts for retry limits and backoff factors.
type IntOrString int

// ParseIntOrString reads a non-negative integer from a number or a string of
// digits.
func ParseIntOrString(v any) (IntOrString, error) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case string:
		s = strings.TrimSpace(x)
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	case int:
		s = strconv.Itoa(x)
	default:
		return 0, fmt.Errorf("want a non-negative integer, got %s", jsonKind(v))
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("want a non-negative integer, got %q", s)
	}
	return IntOrString(n), nil
}

// UnmarshalJSON accepts a number or a string of digits. It is lenient: a
// bad value leaves zero, because Parse reports it with its path.
func (n *IntOrString) UnmarshalJSON(b []byte) error {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	if x, err := ParseIntOrString(v); err == nil {
		*n = x
	}
	return nil
}

func (*IntOrString) shape(v any) (reflect.Type, string) {
	if _, err := ParseIntOrString(v); err != nil {
		return nil, err.Error()
	}
	return nil, ""
}

// jsonKind names the JSON kind of a decoded value for messages.
func jsonKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float64, float32, int, int64, int32, uint64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	case SecretValue:
		return jsonKind(x.Value)
	}
	return fmt.Sprintf("a %T", v)
}
