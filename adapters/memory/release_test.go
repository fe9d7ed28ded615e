package memory_test

import (
	"testing"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

func TestReleaseStoreConformance(t *testing.T) {
	t.Parallel()
	porttest.ReleaseStore(t, func(_ *testing.T, deps porttest.ReleaseStoreDeps) ports.ReleaseStore {
		return memory.NewReleaseStore(deps.Clock, memory.WithVersionPageHook(deps.OnPage))
	})
}
