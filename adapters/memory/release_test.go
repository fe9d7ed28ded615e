package memory_test

import (
	"testing"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

// newReleaseStore is the memory factory of the release suites.
func newReleaseStore(_ *testing.T, deps porttest.ReleaseStoreDeps) ports.ReleaseStore {
	return memory.NewReleaseStore(deps.Clock, memory.WithVersionPageHook(deps.OnPage))
}

func TestObjectsConformance(t *testing.T) {
	t.Parallel()
	porttest.Objects(t, newReleaseStore)
}

func TestTargetsConformance(t *testing.T) {
	t.Parallel()
	porttest.Targets(t, newReleaseStore)
}

func TestVersionsConformance(t *testing.T) {
	t.Parallel()
	porttest.Versions(t, newReleaseStore)
}

func TestReleasesConformance(t *testing.T) {
	t.Parallel()
	porttest.Releases(t, newReleaseStore)
}

func TestJobTakerConformance(t *testing.T) {
	t.Parallel()
	porttest.JobTaker(t, newReleaseStore)
}

func TestJobsConformance(t *testing.T) {
	t.Parallel()
	porttest.Jobs(t, newReleaseStore)
}

func TestEventsConformance(t *testing.T) {
	t.Parallel()
	porttest.Events(t, newReleaseStore)
}

func TestTargetFactsConformance(t *testing.T) {
	t.Parallel()
	porttest.TargetFacts(t, newReleaseStore)
}

func TestTransactorConformance(t *testing.T) {
	t.Parallel()
	porttest.Transactor(t, func(_ *testing.T, clock ports.Clock) porttest.TxWorld {
		store, queue := memory.NewReleaseStore(clock), memory.NewQueue(clock)
		return porttest.TxWorld{Tx: memory.NewTransactor(store, queue), Store: store, Queue: queue, Audit: memory.NewAuditLog()}
	})
}

func TestLivenessConformance(t *testing.T) {
	t.Parallel()
	porttest.Liveness(t, func(*testing.T) ports.Liveness { return memory.NewLiveness() })
}
