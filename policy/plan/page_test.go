package plan

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestPagesCoverTheDiff: reading a diff page by page, each after the key
// the one before returned, yields every target once, in key order, each
// page at most limit long, and the summary counts them all.
func TestPagesCoverTheDiff(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 40).Draw(rt, "targets")
		var d Diff
		for i := range n {
			d.Targets = append(d.Targets, Target{Key: fmt.Sprintf("d:e:r%03d", i), Created: i%3 == 0, Removed: i%5 == 0,
				Desired: &DesiredChange{After: &Desired{ReleaseID: fmt.Sprint(i % 2)}}})
		}
		limit := rapid.IntRange(1, 10).Draw(rt, "limit")
		var got []Target
		after := ""
		for pages := 0; ; pages++ {
			require.LessOrEqual(rt, pages, n, "the pages end")
			p, next := d.Page(after, limit)
			require.LessOrEqual(rt, len(p.Targets), limit)
			got = append(got, p.Targets...)
			if next == "" {
				break
			}
			require.Equal(rt, p.Targets[len(p.Targets)-1].Key, next)
			after = next
		}
		require.Equal(rt, d.Targets, append([]Target(nil), got...))
		all, next := d.Page("", 0)
		require.Empty(rt, next)
		require.Len(rt, all.Targets, n, "limit 0: everything")
		s := d.Summary()
		require.Equal(rt, n, s.Targets)
		require.Equal(rt, (n+2)/3, s.Created)
		require.Equal(rt, (n+4)/5, s.Removed)
		require.Equal(rt, n, s.Moved, "every target is decided for the first time")
		require.Equal(rt, s.Digest, d.Summary().Digest, "the same plan, the same digest")
		if n > 0 {
			moved := Diff{Targets: append([]Target(nil), d.Targets...)}
			moved.Targets[n-1].Desired = &DesiredChange{After: &Desired{ReleaseID: "other"}}
			require.NotEqual(rt, s.Digest, moved.Summary().Digest, "a release moved: another plan")
			reworded := Diff{Targets: append([]Target(nil), d.Targets...)}
			reworded.Targets[0].Desired = &DesiredChange{After: &Desired{ReleaseID: d.Targets[0].Desired.After.ReleaseID, Reasons: []string{"x"}}}
			require.Equal(rt, s.Digest, reworded.Summary().Digest, "reasons do not count")
		}
	})
}

// TestPageAfterAMissingKey: a cursor whose target has left the diff
// continues at the next key.
func TestPageAfterAMissingKey(t *testing.T) {
	d := Diff{Targets: []Target{{Key: "a"}, {Key: "c"}, {Key: "e"}}}
	p, next := d.Page("b", 1)
	require.Equal(t, []Target{{Key: "c"}}, p.Targets)
	require.Equal(t, "c", next)
	p, next = d.Page("e", 1)
	require.Empty(t, p.Targets)
	require.Empty(t, next)
}
