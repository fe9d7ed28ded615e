package pull_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/pull"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

func TestJobAgentConformance(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{release.PullAgentType, release.APIAgentType} {
		t.Run(typ, func(t *testing.T) {
			porttest.JobAgent(t, func(*testing.T, ports.JobReporter) ports.JobAgent { return pull.NewAgent(typ) },
				porttest.JobAgentOptions{Passive: true})
		})
	}
}

func TestDispatchLeavesThePendingJobToATaker(t *testing.T) {
	t.Parallel()
	a := pull.NewAgent(release.PullAgentType)
	d := ports.JobDispatch{Job: release.Job{ID: "j1"}, Agent: release.JobAgent{ID: "puller", Type: release.PullAgentType,
		Config: map[string]any{"lease": "30s"}}}
	res, err := a.Dispatch(t.Context(), d)
	require.NoError(t, err)
	require.Equal(t, ports.JobDispatchResult{Status: release.JobPending, ExternalID: "j1",
		Message: "waiting for a taker of agent puller (POST /api/v1/job-agents/puller/jobs/next)"}, res)
	d.Agent.Config["lease"] = "forever"
	_, err = a.Dispatch(t.Context(), d)
	var fe *release.FieldError
	require.ErrorAs(t, err, &fe, "a bad config ends the job invalidIntegration")
	require.Equal(t, "job_agent_config.lease", fe.Field)
}

func TestValidateConfig(t *testing.T) {
	t.Parallel()
	require.NoError(t, pull.ValidateConfig(nil))
	require.NoError(t, pull.ValidateConfig(map[string]any{"lease": "2m", "max_hand_outs": float64(5), "report_secret": "env:RECONCILER_SECRET_X"}))
	for cfg, field := range map[string]map[string]any{
		"job_agent_config.lease":         {"lease": "0s"},
		"job_agent_config.max_hand_outs": {"max_hand_outs": float64(0)},
		"job_agent_config.report_secret": {"report_secret": "plaintext-secret"},
	} {
		var fe *release.FieldError
		require.ErrorAs(t, pull.ValidateConfig(field), &fe)
		require.Equal(t, cfg, fe.Field)
	}
}
