package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// secretPlaceholder is what a sensitive variable resolves to in a
// TaskRun's dispatch config: stored state never holds a secret's value.
func secretPlaceholder(name string) string { return "${secret:" + name + "}" }

var placeholderRe = regexp.MustCompile(`\$\{secret:([^}]+)\}`)

// reveal returns v with every ${secret:NAME} replaced by the resolved
// value of the workflow's sensitive variable NAME; without a resolver the
// reference is left as JSON. The result goes to the executor only.
func (c *Controller) reveal(ctx context.Context, w *ports.WorkflowRecord, v any) (any, error) {
	var firstErr error
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return placeholderRe.ReplaceAllStringFunc(x, func(m string) string {
				name := placeholderRe.FindStringSubmatch(m)[1]
				s, err := c.secret(ctx, w, name)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				return s
			})
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				out[k] = walk(e)
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = walk(e)
			}
			return out
		}
		return v
	}
	out := walk(v)
	return out, firstErr
}

// secret resolves the workflow's sensitive variable name.
func (c *Controller) secret(ctx context.Context, w *ports.WorkflowRecord, name string) (string, error) {
	var ref release.SecretRef
	b, err := json.Marshal(w.Variables[name])
	if err == nil {
		err = json.Unmarshal(b, &ref)
	}
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", name, err)
	}
	if c.Secrets == nil {
		return string(b), nil
	}
	s, err := c.Secrets.Resolve(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", name, err)
	}
	return s, nil
}
