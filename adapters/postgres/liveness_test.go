package postgres_test

import (
	"testing"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

func TestLivenessConformance(t *testing.T) {
	t.Parallel()
	pgtest.DSN(t) // skip up front rather than in every subtest
	porttest.Liveness(t, func(t *testing.T) ports.Liveness {
		db, _ := openDB(t)
		return postgres.NewLiveness(db)
	})
}
