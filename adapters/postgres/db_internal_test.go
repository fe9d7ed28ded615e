package postgres

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
)

// TestOpenTakesPoolSettingsFromTheDSN: a DSN's pool settings (pgxpool's
// pool_max_conns) size the pool instead of reaching the server as
// run-time parameters, which it would refuse: operators running several
// serve processes budget the server's connections with it.
func TestOpenTakesPoolSettingsFromTheDSN(t *testing.T) {
	t.Parallel()
	dsn, _ := pgtest.Schema(t)
	if strings.Contains(dsn, "://") {
		dsn += "&pool_max_conns=3"
	} else {
		dsn += " pool_max_conns=3"
	}
	db, err := Open(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	require.Equal(t, 3, db.MaxConns())
	var one int
	require.NoError(t, db.pool.QueryRow(t.Context(), "SELECT 1").Scan(&one))
	require.Equal(t, 1, one)
}
