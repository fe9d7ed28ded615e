package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
)

// TestBenchQueue: the backlog drains, every item passed once (a call per
// item, or batches of up to 16 with --pass-items), and the final JSON line
// holds the figures; on Postgres also what the server counted.
func TestBenchQueue(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"memory", "postgres"} {
		for _, passItems := range []string{"1", "16"} {
			t.Run(name+"/pass-items="+passItems, func(t *testing.T) {
				t.Parallel()
				benchQueueDrains(t, name, passItems)
			})
		}
	}
}

// benchQueueDrains runs bench queue on store name with --pass-items
// passItems and checks its line.
func benchQueueDrains(t *testing.T, name, passItems string) {
	args := []string{"bench", "queue", "--items", "1500", "--batch", "64", "--duration", "6s", "--rate", "200", "--pass-items", passItems}
	if name == "postgres" {
		args = append(args, "--dsn", pgtest.DSN(t))
	}
	got := benchLine(t, args...)
	require.Equal(t, "queue", got["bench"])
	require.Equal(t, name, got["store"])
	require.Equal(t, passItems, fmt.Sprint(got["pass_items"]))
	require.EqualValues(t, 1500, got["items"])
	require.EqualValues(t, 1500, got["completions"], "every item passed once")
	require.Equal(t, true, got["drained"])
	require.Greater(t, got["seconds"], 0.0)
	require.Greater(t, got["items_per_sec"], 0.0)
	require.Greater(t, got["lease_latency_p50_ms"], 0.0)
	requireServerFigures(t, name, "item", 1500, got)
	if name == "postgres" {
		// Every item is leased (an update) and acked (a delete).
		require.GreaterOrEqual(t, got["rows_written"], 2*1500.0)
	}
}

// TestBenchQueueBadFlags: non-positive sizes are usage errors.
func TestBenchQueueBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--items", "0"}, {"--workers", "0"}, {"--duration", "0s"}, {"--pass-items", "0"}} {
		res := runCLI(t, "", append([]string{"bench", "queue"}, args...)...)
		require.Equal(t, 2, res.code, "%v: %s", args, res.stderr)
	}
}
