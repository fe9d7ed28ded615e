package ports

import (
	"slices"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// StoredTime is t as every store keeps it: in UTC at microsecond precision
// (PostgreSQL's); the zero time stays the zero time.
func StoredTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

// StoredMeasurements returns a copy of m with every reading's time as
// StoredTime; the caller's slices are not changed.
func StoredMeasurements(m map[string][]release.Measurement) map[string][]release.Measurement {
	if m == nil {
		return nil
	}
	out := make(map[string][]release.Measurement, len(m))
	for k, ms := range m {
		c := slices.Clone(ms)
		for i := range c {
			c[i].At = StoredTime(c[i].At)
		}
		out[k] = c
	}
	return out
}
