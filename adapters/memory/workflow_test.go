package memory_test

import (
	"testing"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

func TestWorkflowStoreConformance(t *testing.T) {
	t.Parallel()
	porttest.WorkflowStore(t, func(*testing.T) ports.WorkflowStore { return memory.NewWorkflowStore() })
}

func TestWorkflowJobsConformance(t *testing.T) {
	porttest.WorkflowJobs(t, func(*testing.T) ports.WorkflowStore { return memory.NewWorkflowStore() })
}
