package postgres_test

import (
	"testing"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

func TestReleaseStoreConformance(t *testing.T) {
	t.Parallel()
	porttest.ReleaseStore(t, func(t *testing.T, deps porttest.ReleaseStoreDeps) ports.ReleaseStore {
		return postgres.NewReleaseStore(runStoreSetup(t), deps.Clock, postgres.WithVersionPageHook(deps.OnPage))
	})
}
