package postgres_test

import (
	"testing"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

func TestTokensConformance(t *testing.T) {
	t.Parallel()
	porttest.Tokens(t, func(t *testing.T) ports.Tokens { return postgres.NewTokens(runStoreSetup(t)) })
}
