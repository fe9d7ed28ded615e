package chain

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// handoffTarget is the i-th target of the hand-off tests.
func handoffTarget(i int) release.ReleaseTarget {
	return release.ReleaseTarget{DeploymentID: "d", EnvironmentID: "e", ResourceID: fmt.Sprint("r", i)}
}

// TestHandoffBounded: whatever is put and taken, the hand-off holds at
// most its limit of targets; a target's facts are taken at most once,
// and they are the last put for it; the newest limit/2 puts of distinct
// targets are never dropped.
func TestHandoffBounded(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(2, 16).Draw(rt, "limit")
		h := handoff{limit: limit}
		last := map[release.ReleaseTarget]string{}
		var recent []release.ReleaseTarget // newest last, distinct
		for range rapid.IntRange(0, 6*limit).Draw(rt, "ops") {
			tg := handoffTarget(rapid.IntRange(0, 2*limit).Draw(rt, "target"))
			if rapid.IntRange(0, 9).Draw(rt, "op") == 0 {
				f, ok := h.take(tg)
				want, held := last[tg]
				if ok {
					require.True(rt, held, "taken, never put since the last take")
					require.Equal(rt, want, f.Stamp.Rest, "the last facts put")
				}
				delete(last, tg)
				continue
			}
			v := fmt.Sprint(len(last), tg.ResourceID)
			h.put(tg, ports.TargetFacts{Stamp: ports.FactsStamp{Rest: v}})
			last[tg] = v
			for i, r := range recent {
				if r == tg {
					recent = append(recent[:i], recent[i+1:]...)
					break
				}
			}
			recent = append(recent, tg)
			require.LessOrEqual(rt, len(h.cur)+len(h.old), limit, "bounded")
		}
		for i := max(0, len(recent)-limit/2); i < len(recent); i++ {
			tg := recent[i]
			if want, ok := last[tg]; ok {
				f, held := h.take(tg)
				require.True(rt, held, "%s: among the newest puts", tg.Key())
				require.Equal(rt, want, f.Stamp.Rest)
			}
		}
	})
}

// TestHandoffConcurrent: puts and takes from many goroutines (run under
// -race) leave each target's facts taken at most once.
func TestHandoffConcurrent(t *testing.T) {
	h := handoff{limit: 64}
	var taken sync.Map
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				tg := handoffTarget(i)
				if g%2 == 0 {
					h.put(tg, ports.TargetFacts{Stamp: ports.FactsStamp{Rest: fmt.Sprint(g, "/", i)}})
					continue
				}
				if f, ok := h.take(tg); ok {
					_, dup := taken.LoadOrStore(f.Stamp.Rest, true)
					require.False(t, dup, "facts %s taken twice", f.Stamp.Rest)
				}
			}
		}()
	}
	wg.Wait()
}
