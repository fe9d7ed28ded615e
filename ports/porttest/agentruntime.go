package porttest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// AgentRuntimeFixture is one ports.AgentRuntime under test and what the
// suite can see of its effects.
type AgentRuntimeFixture struct {
	Runtime ports.AgentRuntime
	// Launched returns how many agents the runtime has started for ref so
	// far; Released how many times it has let ref's pod go. How it counts
	// is the implementation's own (a record, a process table, pods).
	Launched, Released func(ref reconcile.RunRef) int
}

// suiteLaunches are launches of every kind with the purposes the run
// executor uses for it.
var suiteLaunches = []ports.AgentLaunchParams{
	{Ref: reconcile.RunRef{Kind: reconcile.KindRepo, ID: "suite-repo"}, Purpose: ports.PurposeRun},
	{Ref: reconcile.RunRef{Kind: reconcile.KindRepo, ID: "suite-repo"}, Purpose: ports.PurposeResume, Trigger: "ci-failing"},
	{Ref: reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "suite-standalone"}, Purpose: ports.PurposeRun},
	{Ref: reconcile.RunRef{Kind: reconcile.KindPRReview, ID: "suite-review"}, Purpose: ports.PurposeReview},
	{Ref: reconcile.RunRef{Kind: reconcile.KindPersistentAgent, ID: "suite-agent"}, Purpose: ports.PurposeTurn},
}

// AgentRuntime is the conformance suite of ports.AgentRuntime. newRuntime
// is called once per subtest; subtests run in parallel.
//
// It checks the port's contract, not any one runtime: a launch of every
// kind and purpose succeeds and starts one agent; launches and releases
// are idempotent by key, sequentially and under concurrent calls (run it
// with -race); a new key for the same run (a resume, the next turn) is a
// new launch; and releasing a run that has no agent is not an error.
func AgentRuntime(t *testing.T, newRuntime func(t *testing.T) AgentRuntimeFixture) {
	t.Run("LaunchEveryKindAndPurpose", func(t *testing.T) {
		t.Parallel()
		f := newRuntime(t)
		want := map[reconcile.RunRef]int{}
		for i, p := range suiteLaunches {
			p.IdempotencyKey = fmt.Sprintf("%s/%d/launch", p.Ref, i)
			require.NoError(t, f.Runtime.AgentLaunch(t.Context(), p), "%+v", p)
			want[p.Ref]++
		}
		for ref, n := range want {
			require.Equal(t, n, f.Launched(ref), "launches of %s", ref)
			require.Zero(t, f.Released(ref), "nothing released %s", ref)
		}
	})
	t.Run("LaunchIsIdempotentByKey", func(t *testing.T) {
		t.Parallel()
		f := newRuntime(t)
		p := suiteLaunches[0]
		p.IdempotencyKey = p.Ref.String() + "/1/launch"
		for range 3 {
			require.NoError(t, f.Runtime.AgentLaunch(t.Context(), p))
		}
		require.Equal(t, 1, f.Launched(p.Ref), "a retried launch starts nothing more")
		p.Purpose, p.Trigger, p.IdempotencyKey = ports.PurposeResume, "conflicts", p.Ref.String()+"/2/resume"
		require.NoError(t, f.Runtime.AgentLaunch(t.Context(), p))
		require.NoError(t, f.Runtime.AgentLaunch(t.Context(), p))
		require.Equal(t, 2, f.Launched(p.Ref), "a new key is a new launch")
	})
	t.Run("ConcurrentLaunchesOfOneKeyStartOne", func(t *testing.T) {
		t.Parallel()
		f := newRuntime(t)
		p := suiteLaunches[4]
		p.IdempotencyKey = p.Ref.String() + "/7/turn"
		requireConcurrentOK(t, 16, func() error { return f.Runtime.AgentLaunch(t.Context(), p) })
		require.Equal(t, 1, f.Launched(p.Ref))
	})
	t.Run("ReleaseIsIdempotentByKey", func(t *testing.T) {
		t.Parallel()
		f := newRuntime(t)
		p := suiteLaunches[2]
		p.IdempotencyKey = p.Ref.String() + "/1/launch"
		require.NoError(t, f.Runtime.AgentLaunch(t.Context(), p))
		key := p.Ref.String() + "/2/release"
		requireConcurrentOK(t, 8, func() error { return f.Runtime.AgentRelease(t.Context(), p.Ref, key) })
		require.NoError(t, f.Runtime.AgentRelease(t.Context(), p.Ref, key))
		require.Equal(t, 1, f.Released(p.Ref), "a retried release lets go once")
		require.Equal(t, 1, f.Launched(p.Ref), "releasing launches nothing")
	})
	t.Run("ReleaseWithoutAgentIsNotAnError", func(t *testing.T) {
		t.Parallel()
		f := newRuntime(t)
		ref := reconcile.RunRef{Kind: reconcile.KindPersistentAgent, ID: "suite-never-launched"}
		require.NoError(t, f.Runtime.AgentRelease(t.Context(), ref, ref.String()+"/3/release"))
		require.Zero(t, f.Launched(ref))
	})
}

// requireConcurrentOK makes n calls at once and requires each to succeed.
func requireConcurrentOK(t *testing.T, n int, call func() error) {
	t.Helper()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { errs <- call() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
