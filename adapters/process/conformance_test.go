package process

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/runobserve/runobservetest"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// TestAgentRuntimeConformance runs the AgentRuntime suite against real
// `sh` processes under the supervisor. The runtime's own account of what
// it did is its log: Launched counts agent.start records (each names the
// started supervisor's pid), Released agent.release records.
func TestAgentRuntimeConformance(t *testing.T) {
	t.Parallel()
	porttest.AgentRuntime(t, func(t *testing.T) porttest.AgentRuntimeFixture {
		events := &runobservetest.Events{}
		// Every run exists, of repo acme/suite, in no state an
		// observation waits for: the observers end at once.
		store := runobservetest.NewStore("acme/suite")
		store.Every = true
		// The agent lives until it is released or the test ends.
		cfg := Config{Command: "sh", Args: []string{"-c", "echo started; exec sleep 60"}, WorkRoot: t.TempDir(), Supervisor: supervisor(),
			StopGrace: 5 * time.Second, Heartbeat: time.Hour, LandWait: time.Second}
		rt, err := New(cfg, Options{Store: store, Logger: events.Logger()})
		require.NoError(t, err)
		t.Cleanup(func() { stopAgents(rt); rt.Close() })
		return porttest.AgentRuntimeFixture{
			Runtime: rt,
			Launched: func(ref reconcile.RunRef) int {
				started := events.Of("agent.start", ref)
				for _, e := range started {
					require.Positive(t, e.Pid, "a started agent is a real process")
				}
				return len(started)
			},
			Released: func(ref reconcile.RunRef) int { return events.Count("agent.release", ref) },
		}
	})
}
