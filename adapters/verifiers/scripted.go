package verifiers

import (
	"context"
	"errors"
	"fmt"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// ScriptedType is the policy.Provider.Type served by Scripted.
const ScriptedType = "scripted"

// Scripted is the "scripted" verification provider: it plays back a fixed
// list of results, one per attempt, for tests and scenarios. Config:
//
//	results  non-empty list; attempt n gets results[n-1], attempts past
//	         the end get the last entry. An entry that is an object with
//	         exactly the key "error" (a string) fails that measurement with
//	         that message.
//
// The zero value is ready to use and goroutine-safe.
type Scripted struct{}

var _ ports.Verifier = Scripted{}

// Type returns "scripted".
func (Scripted) Type() string { return ScriptedType }

// Measure returns a copy of the entry for r.Attempt, or the scripted error.
// An Attempt below 1 is an error.
func (Scripted) Measure(ctx context.Context, r ports.MeasureRequest) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.Attempt < 1 {
		return nil, fmt.Errorf("scripted: metric %q: attempt %d: %w", r.Metric.Name, r.Attempt, release.Invalid("attempt", "must be at least 1"))
	}
	const key = "results"
	raw, ok := r.Metric.Provider.Config[key]
	if !ok {
		return nil, fmt.Errorf("scripted: metric %q: %w", r.Metric.Name, release.Invalid(configField(key), "is required"))
	}
	results, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("scripted: metric %q: %w", r.Metric.Name, release.Invalid(configField(key), fmt.Sprintf("want a list, got %T", raw)))
	}
	if len(results) == 0 {
		return nil, fmt.Errorf("scripted: metric %q: %w", r.Metric.Name, release.Invalid(configField(key), "must not be empty"))
	}
	i := min(r.Attempt, len(results)) - 1
	field := release.Index(configField(key), i)
	entry := results[i]
	if m, ok := entry.(map[string]any); ok && len(m) == 1 {
		if v, ok := m["error"]; ok {
			msg, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("scripted: metric %q: %w", r.Metric.Name, release.Invalid(release.Field(field, "error"), fmt.Sprintf("want a string, got %T", v)))
			}
			return nil, fmt.Errorf("scripted: metric %q: attempt %d: %w", r.Metric.Name, r.Attempt, errors.New(msg))
		}
	}
	out, err := jsonCopy(field, entry)
	if err != nil {
		return nil, fmt.Errorf("scripted: metric %q: %w", r.Metric.Name, err)
	}
	return out, nil
}
