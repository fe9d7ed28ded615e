package verifiers

import (
	"context"
	"fmt"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// SleepType is the policy.Provider.Type served by Sleep.
const SleepType = "sleep"

// Sleep is the "sleep" verification provider: it stands for a slow
// measurement. Config:
//
//	duration  Go duration string ("3s"), required, not negative
//	result    any JSON value returned after the wait; default {"ok": true}
//
// The zero value is ready to use and goroutine-safe.
type Sleep struct{}

var _ ports.Verifier = Sleep{}

// Type returns "sleep".
func (Sleep) Type() string { return SleepType }

// Measure waits the configured duration and returns a copy of the
// configured result, or ctx.Err() when ctx ends first.
func (Sleep) Measure(ctx context.Context, r ports.MeasureRequest) (any, error) {
	d, result, err := parseSleep(r.Metric.Provider.Config)
	if err != nil {
		return nil, fmt.Errorf("sleep: metric %q: %w", r.Metric.Name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ports.Sleep(ctx, d); err != nil {
		return nil, err
	}
	return result, nil
}

// parseSleep reads the duration and a copy of the result.
func parseSleep(cfg map[string]any) (time.Duration, any, error) {
	v, ok := cfg["duration"]
	if !ok {
		return 0, nil, release.Invalid(configField("duration"), "is required")
	}
	s, ok := v.(string)
	if !ok {
		return 0, nil, release.Invalid(configField("duration"), fmt.Sprintf("want a duration string such as \"3s\", got %T", v))
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, nil, release.Invalid(configField("duration"), fmt.Sprintf("invalid duration %q", s))
	}
	if d < 0 {
		return 0, nil, release.Invalid(configField("duration"), fmt.Sprintf("must not be negative, got %q", s))
	}
	raw, ok := cfg["result"]
	if !ok {
		return d, map[string]any{"ok": true}, nil
	}
	result, err := jsonCopy(configField("result"), raw)
	if err != nil {
		return 0, nil, err
	}
	return d, result, nil
}
