package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver for schema set-up

	"github.com/reconcilerhq/reconciler/ports"
)

// openBenchBackend opens the backend a benchmark runs on. On Postgres it
// works in a fresh schema that the returned cleanup drops, so a benchmark
// never touches real data.
func openBenchBackend(ctx context.Context, dsn string) (*backend, func(), error) {
	if dsn == "" {
		be, err := openBackend(ctx, "", false, ports.SystemClock)
		return be, func() {}, err
	}
	schema := fmt.Sprintf("bench_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("open postgres: %w", err)
	}
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		return nil, nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	drop := func() {
		_, _ = admin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		admin.Close()
	}
	be, err := openBackend(ctx, withSearchPath(dsn, schema), true, ports.SystemClock)
	if err != nil {
		drop()
		return nil, nil, err
	}
	return be, func() { be.close(); drop() }, nil
}

// withSearchPath adds a search_path run-time parameter to a URL or
// keyword/value connection string.
func withSearchPath(dsn, schema string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			q := u.Query()
			q.Set("search_path", schema)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " search_path=" + schema
}
