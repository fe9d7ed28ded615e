package memory_test

import (
	"testing"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

func TestTokensConformance(t *testing.T) {
	t.Parallel()
	porttest.Tokens(t, func(*testing.T) ports.Tokens { return memory.NewTokens() })
}
