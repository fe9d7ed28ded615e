package apiagent_test

import (
	"testing"

	"github.com/reconcilerhq/reconciler/adapters/apiagent"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

func TestJobAgentConformance(t *testing.T) {
	t.Parallel()
	porttest.JobAgent(t, func(*testing.T, ports.JobReporter) ports.JobAgent { return apiagent.Agent{} },
		porttest.JobAgentOptions{Passive: true})
}
