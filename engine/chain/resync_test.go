package chain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestResyncSourceCoversEveryChainKind: the sweep lists every target's
// desired-release and job-dispatch items, and the verification item of
// each job whose verification runs; the passes they start find nothing
// new to do on a settled chain.
func TestResyncSourceCoversEveryChainKind(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		h.policy(policy.Policy{ID: "verify-dev", Selector: `environment.name == "dev"`, Rules: []policy.Rule{
			{ID: "smoke", Spec: policy.Verification{Metrics: []policy.MetricSpec{{Name: "smoke", Count: 3, IntervalSeconds: 60,
				Provider: policy.Provider{Type: "test", Config: map[string]any{"ok": true}}, SuccessCondition: "result.ok"}}}}}})
		h.version("v1")
		h.drain()
		h.finish(release.JobSuccessful, "dev")
		h.drain()
		var want []ports.WorkKey
		for _, env := range []string{"dev", "staging", "prod"} {
			for _, res := range []string{"c1", "c2"} {
				want = append(want, chain.TargetKey(chain.KindDesiredRelease, target(env, res)), chain.TargetKey(chain.KindJobDispatch, target(env, res)))
				if env == "dev" {
					job := h.jobs(env, res)[0]
					require.Equal(t, release.VerificationRunning, job.Verification)
					want = append(want, chain.JobKey(job.ID))
				}
			}
		}
		var got []ports.WorkKey
		require.NoError(t, h.chain.ResyncSource()(h.ctx, func(k ports.WorkKey) error { got = append(got, k); return nil }))
		require.ElementsMatch(t, want, got)
		kinds := map[string]bool{}
		for _, k := range got {
			kinds[k.Kind] = true
		}
		for _, k := range chain.Kinds {
			if k != chain.KindJobEligibility { // nothing enqueues it any more (older versions' items only)
				require.True(t, kinds[k], "kind %s is swept", k)
			}
		}
		h.clock.Advance(time.Second)
		require.NoError(t, h.q.WorkEnqueue(h.ctx, enqueueAll(got)...))
		h.drain()
		require.Len(t, h.jobs("dev", "c1"), 1, "a sweep of a settled chain creates no job")
	})
}

func enqueueAll(keys []ports.WorkKey) []ports.EnqueueParams {
	out := make([]ports.EnqueueParams, len(keys))
	for i, k := range keys {
		out[i] = ports.EnqueueParams{Key: k}
	}
	return out
}
