package workflow

import (
	"fmt"
	"strings"
)

// containsSecret reports whether v is or holds a SecretValue.
func containsSecret(v any) bool {
	switch x := v.(type) {
	case SecretValue:
		return true
	case map[string]any:
		for _, e := range x {
			if containsSecret(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if containsSecret(e) {
				return true
			}
		}
	}
	return false
}

// unwrapSecrets returns v with every SecretValue replaced by its value. It
// returns v itself when v holds no secret.
func unwrapSecrets(v any) any {
	if !containsSecret(v) {
		return v
	}
	return mapSecrets(v, func(s SecretValue) any { return unwrapSecrets(s.Value) })
}

// redactSecrets returns v with every SecretValue replaced by Redacted.
func redactSecrets(v any) any {
	if !containsSecret(v) {
		return v
	}
	return mapSecrets(v, func(SecretValue) any { return Redacted })
}

func mapSecrets(v any, f func(SecretValue) any) any {
	switch x := v.(type) {
	case SecretValue:
		return f(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = mapSecrets(e, f)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = mapSecrets(e, f)
		}
		return out
	}
	return v
}

// cond is a compiled `when` condition.
type cond struct {
	src string
	ref *ref
}

// compileWhen compiles a `when` condition: exactly one {{ }} reference (a
// path or CEL) or a bare CEL expression.
func compileWhen(src string, matrix bool) (*cond, error) {
	s := strings.TrimSpace(src)
	if s == "" {
		return nil, fmt.Errorf("empty condition")
	}
	if strings.Contains(s, "{{") {
		t, err := parseString(s, matrix)
		if err != nil {
			return nil, err
		}
		if !t.whole {
			return nil, fmt.Errorf("write a CEL expression or a single {{...}}, not text around {{ }}: %q", src)
		}
		return &cond{src: src, ref: t.segs[0].ref}, nil
	}
	r, err := compileRef(s, matrix)
	if err != nil {
		return nil, err
	}
	return &cond{src: src, ref: r}, nil
}

// eval evaluates the condition; it must yield a boolean.
func (c *cond) eval(s *Vars) (bool, error) {
	v, _, err := c.ref.eval(s)
	if err != nil {
		return false, err
	}
	v = unwrapSecrets(v)
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("condition %q is %s, want a boolean", c.src, jsonKind(v))
	}
	return b, nil
}
