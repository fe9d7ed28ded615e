package postgres

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
)

// TestOnlyThePublisherNotifies: no statement of this package but the
// publisher's, and no function or trigger the migrations create, calls
// pg_notify, so no writing transaction takes the lock a NOTIFY holds
// through its commit (see publisher). The one exception is
// events_publish, the event stream's mover: Changes calls it alone, in a
// transaction of its own after the writes committed, never inside a
// writer's.
func TestOnlyThePublisherNotifies(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var notifying []string
	for _, f := range files {
		if f == "publisher.go" || f == "doc.go" || strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		if strings.Contains(string(src), "pg_notify") {
			notifying = append(notifying, f)
		}
	}
	require.Empty(t, notifying, "files with statements calling pg_notify")

	db, _ := openSchemaDB(t)
	require.NoError(t, db.MigrateUp(t.Context()))
	rows, err := db.pool.Query(t.Context(), `SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = current_schema() AND p.prosrc LIKE '%pg_notify%'`)
	require.NoError(t, err)
	funcs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"events_publish"}, funcs, "functions of the migrated schema that call pg_notify")
}

// TestPublisherDeliversEveryNotice: what is published while a statement
// is in flight goes out in a later one; a listener on another session
// hears every channel and payload once its sender is idle.
func TestPublisherDeliversEveryNotice(t *testing.T) {
	t.Parallel()
	db, dsn := openSchemaDB(t)
	listener, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = listener.Close(context.Background()) })
	for _, ch := range []string{"pub_a", "pub_b"} {
		_, err := listener.Exec(t.Context(), "LISTEN "+ch)
		require.NoError(t, err)
	}

	want := map[notice]bool{}
	for i := range 50 {
		ch := []string{"pub_a", "pub_b"}[i%2]
		pl := string(rune('a' + i%26))
		want[notice{ch, pl}] = true
		db.pub.publish(ch, pl)
	}
	db.pub.wait()
	got := map[notice]bool{}
	for len(got) < len(want) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		n, err := listener.WaitForNotification(ctx)
		cancel()
		require.NoError(t, err, "heard %d of %d notices", len(got), len(want))
		got[notice{n.Channel, n.Payload}] = true
	}
	require.Equal(t, want, got)
}

// TestAfterCommit: a hook runs once its transaction has committed, once;
// never when it rolls back; after the outer commit when registered in a
// nested InTx (which joins the outer one); at once outside a transaction.
func TestAfterCommit(t *testing.T) {
	t.Parallel()
	db, _ := openSchemaDB(t)
	var ran []string
	hook := func(name string) func() { return func() { ran = append(ran, name) } }

	require.Error(t, db.InTx(t.Context(), func(ctx context.Context) error {
		db.afterCommit(ctx, hook("rolled back"))
		return context.Canceled
	}))
	require.Empty(t, ran, "a rolled-back transaction runs no hook")

	require.NoError(t, db.InTx(t.Context(), func(ctx context.Context) error {
		db.afterCommit(ctx, hook("outer"))
		require.NoError(t, db.InTx(ctx, func(ctx context.Context) error {
			db.afterCommit(ctx, hook("nested"))
			return nil
		}))
		require.Empty(t, ran, "nothing runs before the outer commit")
		return nil
	}))
	require.Equal(t, []string{"outer", "nested"}, ran)

	db.afterCommit(t.Context(), hook("no transaction"))
	require.Equal(t, []string{"outer", "nested", "no transaction"}, ran)
}

// openSchemaDB opens a DB on a fresh schema of its own, closed when the
// test ends, and returns it with its DSN.
func openSchemaDB(t *testing.T) (*DB, string) {
	t.Helper()
	dsn, _ := pgtest.Schema(t)
	db, err := Open(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	return db, dsn
}
