package plan

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestWithDesired: a listed target gets its change whatever it is; another
// target is added only when its release changes (or its decision appears
// or goes); targets stay sorted by key.
func TestWithDesired(t *testing.T) {
	v1, v2, none := &Desired{ReleaseID: "r1", VersionID: "v1"}, &Desired{ReleaseID: "r2", VersionID: "v2"}, &Desired{How: "no-release"}
	tg := func(k string) release.ReleaseTarget { x, _ := release.ParseTargetKey(k); return x }
	d := Diff{Targets: []Target{{Key: "d:e:b", Target: tg("d:e:b"), Created: true}, {Key: "d:e:d", Target: tg("d:e:d")}}}
	changes := map[string]DesiredChange{
		"d:e:b": {After: v1},               // listed, created
		"d:e:d": {Before: v1, After: v1},   // listed, unchanged: kept
		"d:e:a": {Before: none, After: v2}, // moves: added
		"d:e:c": {Before: v1, After: v1},   // unchanged: left out
		"d:e:e": {Before: v1},              // gone: added
	}
	targets := map[string]release.ReleaseTarget{}
	for k := range changes {
		targets[k] = tg(k)
	}
	d.WithDesired(changes, targets)
	var keys []string
	for _, x := range d.Targets {
		keys = append(keys, x.Key)
		require.NotNil(t, x.Desired, x.Key)
		require.Equal(t, changes[x.Key], *x.Desired, x.Key)
	}
	require.Equal(t, []string{"d:e:a", "d:e:b", "d:e:d", "d:e:e"}, keys)
	require.True(t, d.Targets[1].Created, "a listed target keeps what it was")

	for _, tt := range []struct {
		c    DesiredChange
		want bool
	}{
		{DesiredChange{}, false},
		{DesiredChange{Before: none, After: none}, false},
		{DesiredChange{Before: v1, After: v2}, true},
		{DesiredChange{Before: none, After: v1}, true},
		{DesiredChange{After: none}, true},
		{DesiredChange{Before: none}, true},
	} {
		require.Equal(t, tt.want, tt.c.Changed(), "%+v", tt.c)
	}
}
