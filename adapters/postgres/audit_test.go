package postgres_test

import (
	"testing"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

func TestAuditLogConformance(t *testing.T) {
	porttest.AuditLog(t, func(t *testing.T) ports.AuditLog { return postgres.NewAuditLog(runStoreSetup(t)) })
}
