package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOutcomeNoLaterThan(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		in   Outcome
		at   time.Time
		want Outcome
	}{
		{"done runs again then", Done(), t0, RequeueAt(t0)},
		{"a later requeue moves up", RequeueAt(t0.Add(time.Hour)), t0, RequeueAt(t0)},
		{"an earlier requeue stays", RequeueAt(t0.Add(-time.Hour)), t0, RequeueAt(t0.Add(-time.Hour))},
		{"retries stay", Retry(boom), t0, Retry(boom)},
		{"dead letters stay", Terminal(boom), t0, Terminal(boom)},
		{"zero changes nothing", Done(), time.Time{}, Done()},
	} {
		require.Equal(t, tc.want, tc.in.NoLaterThan(tc.at), tc.name)
	}
}
