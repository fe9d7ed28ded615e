package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
)

// TestOpenConnectTimeout: Open against a server that accepts connections
// but never answers fails within the connect timeout, by default, by the
// DSN's connect_timeout and by WithConnectTimeout, instead of hanging.
func TestOpenConnectTimeout(t *testing.T) {
	t.Parallel()
	addr := pgtest.SilentServer(t)
	tests := []struct {
		name string
		dsn  string
		opts []postgres.Option
		want string // the timeout the error names
	}{
		{"option", "postgres://u@" + addr + "/db?sslmode=disable", []postgres.Option{postgres.WithConnectTimeout(300 * time.Millisecond)}, "300ms"},
		{"dsn", "postgres://u@" + addr + "/db?sslmode=disable&connect_timeout=1", nil, "1s"},
		{"default", "postgres://u@" + addr + "/db?sslmode=disable", nil, postgres.DefaultConnectTimeout.String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A hang guard only: the test's claim is the timeout the
			// error names, not how long it took.
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			db, err := postgres.Open(ctx, tt.dsn, tt.opts...)
			if err == nil {
				db.Close()
			}
			require.Error(t, err)
			require.NoError(t, ctx.Err(), "Open waited past its connect timeout")
			require.ErrorContains(t, err, addr)
			require.ErrorContains(t, err, "no answer within the connect timeout of "+tt.want+":")
		})
	}
}

// TestMigrateSaysItWaitsForTheLock: a migration that finds another
// session holding the schema's migration lock says so, naming that
// session's process, waits, and migrates once the lock is released.
func TestMigrateSaysItWaitsForTheLock(t *testing.T) {
	t.Parallel()
	_, dsn, _, holder := setupMigrate(t)
	var pid int
	require.NoError(t, holder.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid))
	// The holder takes the lock as a migrating process would.
	_, err := holder.Exec(t.Context(), fmt.Sprintf("SELECT pg_advisory_lock(%d, hashtext(coalesce(current_schema(), '')))", 0x7265636f))
	require.NoError(t, err)

	waiting := make(chan int, 1)
	db, err := postgres.Open(t.Context(), dsn, postgres.WithLockWaitNotice(func(p int) { waiting <- p }))
	require.NoError(t, err)
	t.Cleanup(db.Close)
	done := make(chan error, 1)
	go func() { done <- db.MigrateUp(t.Context()) }()
	select {
	case got := <-waiting:
		require.Equal(t, pid, got, "the notice names the holder's process")
	case err := <-done:
		t.Fatalf("MigrateUp returned while another session held the lock: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("no notice that the migration waits for the lock")
	}
	select {
	case err := <-done:
		t.Fatalf("MigrateUp did not wait for the lock: %v", err)
	default:
	}
	_, err = holder.Exec(t.Context(), fmt.Sprintf("SELECT pg_advisory_unlock(%d, hashtext(coalesce(current_schema(), '')))", 0x7265636f))
	require.NoError(t, err)
	require.NoError(t, <-done)
	st, err := db.MigrateStatus(t.Context())
	require.NoError(t, err)
	require.Equal(t, len(st), appliedCount(st))
}
