package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAdaptiveLimit: slow passes (over half the lease) halve the limit,
// down to 1; fast ones (under a quarter) raise it by one, up to the kind's
// concurrency; those in between keep it.
func TestAdaptiveLimit(t *testing.T) {
	const lease = 30 * time.Second
	tests := []struct {
		name   string
		max    int
		passes []time.Duration
		want   int
	}{
		{name: "starts at the concurrency", max: 8, want: 8},
		{name: "a zero concurrency is 1", max: 0, want: 1},
		{name: "a slow pass halves", max: 8, passes: []time.Duration{16 * time.Second}, want: 4},
		{name: "slow passes go down to 1", max: 8, passes: []time.Duration{20 * time.Second, 20 * time.Second, 20 * time.Second, 20 * time.Second, 20 * time.Second}, want: 1},
		{name: "a fast pass raises by one", max: 8, passes: []time.Duration{20 * time.Second, time.Second}, want: 5},
		{name: "never above the concurrency", max: 8, passes: []time.Duration{time.Second, time.Second}, want: 8},
		{name: "in between keeps", max: 8, passes: []time.Duration{20 * time.Second, 10 * time.Second}, want: 4},
		{name: "exactly half the lease keeps", max: 8, passes: []time.Duration{lease / 2}, want: 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAdaptiveLimit(tc.max, lease)
			for _, d := range tc.passes {
				a.observe(d)
			}
			require.Equal(t, tc.want, a.limit())
		})
	}
}
