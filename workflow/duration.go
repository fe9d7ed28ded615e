package workflow

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Duration is a span of time written as Argo writes it: a number of seconds
// (30, "30") or a Go duration string ("90s", "2m", "1h30m").
type Duration time.Duration

// Std returns the duration as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// ParseDuration reads a duration in the template notation: seconds as a
// number or a string of digits, or a Go duration string. Negative durations
// are refused.
func ParseDuration(v any) (Duration, error) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return 0, fmt.Errorf("want seconds or a duration like \"30s\", got %s", x)
		}
		return secondsDuration(f)
	case float64:
		return secondsDuration(x)
	case int:
		return secondsDuration(float64(x))
	case int64:
		return secondsDuration(float64(x))
	case string:
		s := strings.TrimSpace(x)
		if s == "" {
			return 0, fmt.Errorf("want seconds or a duration like \"30s\", got an empty string")
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return secondsDuration(f)
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("want seconds or a duration like \"30s\", got %q", x)
		}
		if d < 0 {
			return 0, fmt.Errorf("duration %q is negative", x)
		}
		return Duration(d), nil
	}
	return 0, fmt.Errorf("want seconds or a duration like \"30s\", got %s", jsonKind(v))
}

func secondsDuration(f float64) (Duration, error) {
	if f < 0 || math.IsNaN(f) || f > float64(math.MaxInt64)/float64(time.Second) {
		return 0, fmt.Errorf("duration %v seconds is out of range", f)
	}
	return Duration(f * float64(time.Second)), nil
}

// UnmarshalJSON accepts seconds or a duration string. It is lenient: a bad
// value leaves zero, because the strict decoder reports it with its path.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	x, err := ParseDuration(v)
	if err == nil {
		*d = x
	}
	return nil
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

func (*Duration) shape(v any) (reflect.Type, string) {
	if _, err := ParseDuration(v); err != nil {
		return nil, err.Error()
	}
	return nil, ""
}

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

// UnmarshalJSON accepts a number or a string of digits; like Duration it is
// lenient and leaves bad values to the strict decoder's report.
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
