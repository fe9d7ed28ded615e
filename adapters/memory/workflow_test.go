package memory_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

func TestWorkflowStoreConformance(t *testing.T) {
	t.Parallel()
	porttest.WorkflowStore(t, func(*testing.T) ports.WorkflowStore { return memory.NewWorkflowStore() })
}

func TestWorkflowJobsConformance(t *testing.T) {
	t.Parallel()
	porttest.WorkflowJobs(t, func(*testing.T) ports.WorkflowStore { return memory.NewWorkflowStore() })
}

// TestWorkflowJobCreateWakesTakers: a created workflow job wakes the
// channels of WorkflowJobNotify; a repeated create does not.
func TestWorkflowJobCreateWakesTakers(t *testing.T) {
	t.Parallel()
	s := memory.NewWorkflowStore()
	wake := s.WorkflowJobNotify(t.Context())
	j := ports.JobRow{Job: release.Job{ID: "wf/w/t/0", JobAgentID: "a", Status: release.JobPending},
		Workflow: &ports.WorkflowJobRef{ID: "w", Task: "t", TaskRunID: "t"}}
	_, created, err := s.WorkflowJobCreate(t.Context(), j)
	require.NoError(t, err)
	require.True(t, created)
	select {
	case <-wake:
	default:
		t.Fatal("no wake-up")
	}
	_, created, err = s.WorkflowJobCreate(t.Context(), j)
	require.NoError(t, err)
	require.False(t, created)
	select {
	case <-wake:
		t.Fatal("a repeated create woke the takers")
	default:
	}
}
