package postgres_test

import (
	"testing"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

func TestWorkflowStoreConformance(t *testing.T) {
	t.Parallel()
	porttest.WorkflowStore(t, func(t *testing.T) ports.WorkflowStore { return postgres.NewWorkflowStore(runStoreSetup(t)) })
}

func TestWorkflowJobsConformance(t *testing.T) {
	t.Parallel()
	porttest.WorkflowJobs(t, func(t *testing.T) ports.WorkflowStore { return postgres.NewWorkflowStore(runStoreSetup(t)) })
}
