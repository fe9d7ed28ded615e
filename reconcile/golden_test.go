package reconcile_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/reconcile"
)

var update = flag.Bool("update", false, "rewrite the golden decisions in testdata/snapshots/golden")

// TestGoldenSnapshots replays every recorded snapshot in testdata/snapshots
// and compares the decision with its golden file (testdata/snapshots/golden/
// under the same name), exactly what `reconciler decide` prints.
func TestGoldenSnapshots(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../testdata/snapshots/*.json")
	require.NoError(t, err)
	snaps := files
	perKind := map[reconcile.RunKind]int{}
	require.GreaterOrEqual(t, len(snaps), 40, "want at least 40 recorded snapshots")
	for _, f := range snaps {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		s, err := reconcile.DecodeSnapshot(data)
		require.NoError(t, err, f)
		perKind[s.Ref().Kind]++
		t.Run(filepath.Base(f), func(t *testing.T) {
			d, err := reconcile.NewDecision(s.Ref(), reconcile.Decide(s))
			require.NoError(t, err)
			got, err := json.MarshalIndent(d, "", "  ")
			require.NoError(t, err)
			got = append(got, '\n')
			golden := filepath.Join(filepath.Dir(f), "golden", filepath.Base(f))
			if *update {
				require.NoError(t, os.WriteFile(golden, got, 0o644))
				return
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "missing golden file; run make golden")
			require.Equal(t, string(want), string(got), "decision changed for %s; if intended, run make golden and review the diff", f)
			// The snapshot itself round-trips losslessly.
			enc, err := reconcile.EncodeSnapshot(s)
			require.NoError(t, err)
			again, err := reconcile.DecodeSnapshot(enc)
			require.NoError(t, err)
			require.Equal(t, s, again)
			require.False(t, bytes.Contains(enc, []byte(`"kind":""`)))
		})
	}
	for _, k := range reconcile.Kinds {
		require.GreaterOrEqual(t, perKind[k], 6, "want at least 6 snapshots of kind %s", k)
	}
}
