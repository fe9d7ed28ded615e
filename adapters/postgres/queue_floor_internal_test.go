package postgres

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestQueueFloorsOverlappingLeases: a lease that left rows behind while
// another lease of its kind ran beside it keeps the floor from rising past
// them, whichever of the two ends first.
func TestQueueFloorsOverlappingLeases(t *testing.T) {
	t.Parallel()
	const d = 40 * time.Second
	kinds := []string{"k"}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	setup := func() *Queue {
		q := &Queue{sweeps: map[string]sweep{}}
		f, g := q.floors(kinds, at(0), d, false)
		require.Equal(t, noFloor, f[0], "never read whole: no floor")
		q.settleFloors(kinds, f, g, kinds, at(0))
		f, _ = q.floors(kinds, at(2), d, false)
		require.Equal(t, at(-1), f[0], "a swept lease raises the floor to its now less the lag")
		return q
	}

	t.Run("left-behind lease ends last", func(t *testing.T) {
		t.Parallel()
		q := setup()
		fa, ga := q.floors(kinds, at(2), d, false) // A: will leave rows behind
		fb, gb := q.floors(kinds, at(3), d, false) // B: skips A's rows, swept
		q.settleFloors(kinds, fb, gb, kinds, at(3))
		q.settleFloors(kinds, fa, ga, nil, at(2))
		f, _ := q.floors(kinds, at(4), d, false)
		require.Equal(t, fa[0], f[0], "A lowers the floor B raised back to its own")
	})
	t.Run("left-behind lease ends first", func(t *testing.T) {
		t.Parallel()
		q := setup()
		fb, gb := q.floors(kinds, at(3), d, false)
		fa, ga := q.floors(kinds, at(3), d, false)
		q.settleFloors(kinds, fa, ga, nil, at(3))
		q.settleFloors(kinds, fb, gb, kinds, at(5))
		f, _ := q.floors(kinds, at(6), d, false)
		require.Equal(t, fa[0], f[0], "B, which ran beside A, does not raise the floor")
	})
	t.Run("whole read", func(t *testing.T) {
		t.Parallel()
		q := setup()
		f, _ := q.floors(kinds, at(3), d, true)
		require.Equal(t, noFloor, f[0], "asked for a whole read")
		f, _ = q.floors(kinds, at(10), d, false)
		require.Equal(t, noFloor, f[0], "a quarter lease since the last whole read")
		f, _ = q.floors(kinds, at(-5), d, false)
		require.Equal(t, noFloor, f[0], "the clock went back")
	})
}
