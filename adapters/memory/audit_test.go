package memory_test

import (
	"testing"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

func TestAuditLogConformance(t *testing.T) {
	porttest.AuditLog(t, func(*testing.T) ports.AuditLog { return memory.NewAuditLog() })
}
