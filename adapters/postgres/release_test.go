package postgres_test

import (
	"testing"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

// newReleaseStore is the Postgres factory (one schema per subtest) of the release suites.
func newReleaseStore(t *testing.T, deps porttest.ReleaseStoreDeps) ports.ReleaseStore {
	s := postgres.NewReleaseStore(runStoreSetup(t), deps.Clock, postgres.WithVersionPageHook(deps.OnPage))
	t.Cleanup(s.Close) // before the DB closes
	return s
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

func TestJobsConformance(t *testing.T) {
	t.Parallel()
	porttest.Jobs(t, newReleaseStore)
}

func TestJobTakerConformance(t *testing.T) {
	t.Parallel()
	porttest.JobTaker(t, newReleaseStore)
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
	porttest.Transactor(t, func(t *testing.T, clock ports.Clock) porttest.TxWorld {
		db := runStoreSetup(t)
		return porttest.TxWorld{Tx: db, Store: postgres.NewReleaseStore(db, clock), Queue: newQueue(t, db, clock), Audit: postgres.NewAuditLog(db)}
	})
}
