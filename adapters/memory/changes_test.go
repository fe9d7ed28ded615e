package memory_test

import (
	"testing"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

func TestChangeStreamConformance(t *testing.T) {
	t.Parallel()
	porttest.ChangeStream(t, func(_ *testing.T, clock ports.Clock, keep int) porttest.ChangeWorld {
		changes := memory.NewChanges(clock, keep, 0)
		store, q := memory.NewReleaseStore(clock), memory.NewQueue(clock)
		store.SetChanges(changes)
		wfs, runs := memory.NewWorkflowStore(), memory.NewRunStore(clock)
		wfs.SetChanges(changes)
		runs.SetChanges(changes)
		return porttest.ChangeWorld{Changes: changes, Store: store, Tx: memory.NewTransactor(store, q),
			Workflows: wfs, Runs: runs, Catalog: store.Catalog}
	})
}
