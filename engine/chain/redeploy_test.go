package chain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// desiredVersion is the version of the target's desired release ("" for
// no release).
func (h *harness) desiredVersion(env, res string) string {
	h.t.Helper()
	d, err := h.store.DesiredGet(h.ctx, target(env, res))
	require.NoError(h.t, err)
	if d.ReleaseID == "" {
		return ""
	}
	rel, err := h.store.ReleaseGet(h.ctx, d.ReleaseID)
	require.NoError(h.t, err)
	return rel.VersionID
}

// requireDesired checks the desired version of every target of envs.
func (h *harness) requireDesired(version string, envs ...string) {
	h.t.Helper()
	for _, env := range envs {
		for _, res := range []string{"c1", "c2"} {
			require.Equal(h.t, version, h.desiredVersion(env, res), "desired on %s/%s", env, res)
		}
	}
}

// jobVersions lists the versions of the target's jobs, oldest first.
func (h *harness) jobVersions(env, res string) []string {
	rows := h.jobs(env, res)
	out := make([]string, len(rows))
	for i := range rows {
		out[len(rows)-1-i] = rows[i].VersionID
	}
	return out
}

var allEnvs = []string{"dev", "staging", "prod"}

// deploy creates a version and lets every target run it successfully.
func (h *harness) deploy(version string) {
	h.t.Helper()
	h.version(version)
	h.drain()
	h.finish(release.JobSuccessful, allEnvs...)
	h.drain()
}

// agentDown makes the fake agent refuse (true) or take (false) dispatches.
func (h *harness) agentDown(down bool) {
	h.agent.mu.Lock()
	defer h.agent.mu.Unlock()
	h.agent.down = down
}

// requireConverged checks what explain says of every target's convergence.
func (h *harness) requireConverged(converged bool, message string) {
	h.t.Helper()
	for _, env := range allEnvs {
		for _, res := range []string{"c1", "c2"} {
			ex, err := h.chain.Explain(h.ctx, target(env, res), 1)
			require.NoError(h.t, err)
			require.Equal(h.t, converged, ex.Convergence.Converged, "%s/%s: %s", env, res, ex.Convergence.Message)
			require.Contains(h.t, ex.Convergence.Message, message, "%s/%s", env, res)
		}
	}
}

// TestExplainConvergence: explain says a target has converged only while
// its newest job is a successful job of its desired release, and otherwise
// what it waits for.
func TestExplainConvergence(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		h.drain()
		h.requireConverged(false, "runs nothing yet; no release is desired")
		h.version("v1")
		h.drain()
		h.requireConverged(false, "runs nothing yet; desired v1: deploying: job")
		h.finish(release.JobFailure, allEnvs...)
		h.drain()
		h.requireConverged(false, "runs nothing yet; desired v1: waits: retry denied: the release's job ended failure and no retry rule applies")
		h.deploy("v2")
		h.requireConverged(true, "runs its desired release v2")
	})
}

// TestScenarioRejectRedeploysPrevious: v1 then v2 run everywhere; rejecting
// v2 makes v1 desired again, and every target gets a new job for v1 (it ran
// v1 before, which must not stop it from running v1 again).
func TestScenarioRejectRedeploysPrevious(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		h.deploy("v1")
		h.deploy("v2")
		h.requireRunning("v2", allEnvs...)

		h.requireConverged(true, "runs its desired release")

		require.NoError(t, h.chain.SetVersionStatus(h.ctx, "v2", release.VersionRejected))
		h.drain()
		h.requireDesired("v1", allEnvs...)
		h.requireRunning("v1", allEnvs...)
		h.requireConverged(false, "runs v2; desired v1: deploying: job")
		h.finish(release.JobSuccessful, allEnvs...)
		h.drain()
		h.requireConverged(true, "runs its desired release v1")
		for _, env := range allEnvs {
			require.Equal(t, []string{"v1", "v2", "v1"}, h.jobVersions(env, "c1"), env)
		}
	})
}

// rollbackAfterV3 sets a rollback rule on failure, deploys v1 and v2
// everywhere and starts v3.
func (h *harness) rollbackAfterV3() {
	h.t.Helper()
	h.policy(policy.Policy{ID: "rollback", Rules: []policy.Rule{
		{ID: "on-failure", Spec: policy.Rollback{OnJobStatuses: []release.JobStatus{release.JobFailure}}}}})
	h.deploy("v1")
	h.deploy("v2")
	h.version("v3")
	h.drain()
}

// TestScenarioRollbackRedeploysLastGood: with a rollback rule, v3 failing
// returns every target to v2, which ran before and is deployed again; v3
// is not tried again, and nothing else runs once v2 succeeded.
func TestScenarioRollbackRedeploysLastGood(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		h.rollbackAfterV3()
		h.requireRunning("v3", allEnvs...)
		h.finish(release.JobFailure, allEnvs...)
		h.drain()
		h.requireDesired("v2", allEnvs...)
		h.requireRunning("v2", allEnvs...)
		h.finish(release.JobSuccessful, allEnvs...)
		h.drain()
		h.requireDesired("v2", allEnvs...)
		for _, env := range allEnvs {
			require.Equal(t, []string{"v1", "v2", "v3", "v2"}, h.jobVersions(env, "c2"), env)
		}
	})
}

// TestScenarioPauseThenUnpause: pausing v2 while dev runs it keeps v2 on
// dev (no rollback) and keeps it from staging; unpausing rolls it on.
func TestScenarioPauseThenUnpause(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		h.policy(policy.Policy{ID: "staging-after-dev", Selector: `environment.name != "dev"`, Rules: []policy.Rule{
			{ID: "after-dev", Spec: policy.EnvironmentProgression{DependsOnEnvironmentSelector: `environment.name == "dev"`, MinimumSuccessPercentage: 100}}}})
		h.version("v1")
		h.drain()
		h.finish(release.JobSuccessful, "dev")
		h.drain()
		h.finish(release.JobSuccessful, "staging", "prod")
		h.drain()
		h.version("v2")
		h.drain()
		h.requireRunning("v2", "dev")
		h.requireRunning("v1", "staging", "prod")

		require.NoError(t, h.chain.SetVersionStatus(h.ctx, "v2", release.VersionPaused))
		h.drain()
		h.requireDesired("v2", "dev") // its job is still running there
		h.requireRunning("v2", "dev")
		h.finish(release.JobSuccessful, "dev")
		h.drain()
		h.requireDesired("v2", "dev")
		h.requireDesired("v1", "staging", "prod")
		h.requireRunning("v1", "staging", "prod")
		require.Equal(t, []string{"v1", "v2"}, h.jobVersions("dev", "c1"), "no rollback of a paused version")
		require.Equal(t, []string{"v1"}, h.jobVersions("staging", "c1"), "a paused version is not rolled out")

		require.NoError(t, h.chain.SetVersionStatus(h.ctx, "v2", release.VersionReady))
		h.drain()
		h.requireRunning("v2", "staging", "prod")
		h.finish(release.JobSuccessful, "staging", "prod")
		h.drain()
		h.requireDesired("v2", allEnvs...)
		require.Equal(t, []string{"v1", "v2"}, h.jobVersions("dev", "c2"))
	})
}

// TestScenarioUndeliveredJobIsSuperseded: v2's jobs are created while the
// agent is unreachable, so none is handed over; rejecting v2 cancels them
// (their agent is asked to stop them) and v1, which ran before, is deployed
// again.
func TestScenarioUndeliveredJobIsSuperseded(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		h.deploy("v1")
		h.agentDown(true)
		h.version("v2")
		h.drain()
		rows := h.jobs("dev", "c1")
		require.Len(t, rows, 2)
		require.Equal(t, release.JobPending, rows[0].Status)
		require.Empty(t, rows[0].ExternalID, "never handed over")

		h.agentDown(false)
		require.NoError(t, h.chain.SetVersionStatus(h.ctx, "v2", release.VersionRejected))
		h.drain()
		for _, env := range allEnvs {
			rows := h.jobs(env, "c2")
			require.Len(t, rows, 3, env)
			require.Equal(t, "v1", rows[0].VersionID, env)
			require.Equal(t, release.JobInProgress, rows[0].Status, env)
			require.Equal(t, release.JobCancelled, rows[1].Status, env)
			require.Contains(t, rows[1].Message, "superseded before dispatch", env)
		}
		superseded := h.jobs("dev", "c1")[1]
		h.agent.mu.Lock()
		defer h.agent.mu.Unlock()
		require.NotContains(t, h.agent.dispatched, superseded.ID, "the superseded job is never handed over")
		require.Contains(t, h.agent.cancelled[superseded.ID].Reason, "superseded before dispatch", "its agent is told to stop it")
	})
}

// TestScenarioRollbackSkipsRejected: the rollback rule never returns a
// target to a rejected version; the newest version the policies allow
// takes its place.
func TestScenarioRollbackSkipsRejected(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		h.rollbackAfterV3()
		require.NoError(t, h.chain.SetVersionStatus(h.ctx, "v2", release.VersionRejected))
		h.drain()
		h.requireRunning("v3", allEnvs...)
		h.finish(release.JobFailure, allEnvs...)
		h.drain()
		h.requireDesired("v1", allEnvs...)
		h.requireRunning("v1", allEnvs...)
	})
}

// TestScenarioRolloutStartsAtWindow: v2 arrives at 08:03, before the 09:00
// allow window; the gradual rollout starts when the window opens and rolls
// each environment on its own: at 09:00 one target of each environment
// takes v2, a minute later the other.
func TestScenarioRolloutStartsAtWindow(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		h.policy(policy.Policy{ID: "window-rollout", Rules: []policy.Rule{
			{ID: "nine-to-five", Spec: policy.DeploymentWindow{RRule: "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0", DurationMinutes: 480}},
			{ID: "one-a-minute", Spec: policy.GradualRollout{RolloutType: policy.RolloutLinear, TimeScaleInterval: 60}}}})
		h.version("v1") // a first deployment ignores windows, not the rollout
		h.drain()
		h.clock.Advance(time.Minute)
		h.drain()
		h.finish(release.JobSuccessful, allEnvs...)
		h.drain()
		h.version("v2")
		h.drain()
		h.requireRunning("v1", allEnvs...)

		nine := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
		h.clock.Set(nine.Add(30 * time.Second))
		h.drain()
		for _, env := range allEnvs {
			got := []string{h.running(env, "c1"), h.running(env, "c2")}
			require.ElementsMatch(t, []string{"v1", "v2"}, got, "%s: one target of the environment at the window's opening", env)
		}
		h.clock.Set(nine.Add(time.Minute))
		h.drain()
		h.requireRunning("v2", allEnvs...)
	})
}
