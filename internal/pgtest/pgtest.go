// Package pgtest gives tests a PostgreSQL to run against: the server named by
// RECONCILER_TEST_DSN, and a fresh schema per test so Postgres tests run in
// parallel without seeing each other's rows.
//
// Invariants:
//   - Outside CI a test that needs Postgres skips when RECONCILER_TEST_DSN is
//     unset; in CI (CI=true) it fails, so a missing server is never a silent
//     pass.
//   - Every schema Schema creates has a unique name and is dropped, with all
//     it holds, when the test ends.
//   - The package knows nothing of the adapters: it speaks plain pgx.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvDSN is the variable that names the test server.
const EnvDSN = "RECONCILER_TEST_DSN"

// DSN returns the test server's connection string. When RECONCILER_TEST_DSN
// is unset the test is skipped, or fails when CI=true.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn != "" {
		return dsn
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("pgtest: " + EnvDSN + " unset in CI: run the tests through scripts/with-postgres.sh (make test)")
	}
	t.Skip("pgtest: " + EnvDSN + " unset: run `make test` (scripts/with-postgres.sh starts a throwaway PostgreSQL) or set it to a server's DSN")
	return ""
}

// Schema creates a fresh, uniquely named schema and returns a DSN whose
// connections use it as their search_path, and its name. The schema is
// dropped with everything in it when the test ends.
func Schema(t testing.TB) (dsn, schema string) {
	t.Helper()
	base := DSN(t)
	schema = schemaName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := adminPool(base)
	if err != nil {
		t.Fatalf("pgtest: connect %s: %v", redact(base), err)
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// A session the test left running (a transaction writing two
		// tables, a trigger writing a second one) can deadlock with the
		// drop, which locks the tables one by one; PostgreSQL aborts one
		// side, so the drop is tried again.
		var err error
		for range 5 {
			if _, err = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); !isDeadlock(err) {
				break
			}
		}
		if err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	dsn, err = WithSearchPath(base, schema)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn, schema
}

// WithSearchPath returns dsn with search_path set to schema as a run-time
// parameter, in URL (postgres://...) or keyword/value form.
func WithSearchPath(dsn, schema string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse dsn: %w", err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return strings.TrimSpace(dsn) + " search_path=" + schema, nil
}

// pools holds one small admin pool per server DSN for the life of the test
// binary; schemas are created and dropped through it.
var (
	poolsMu sync.Mutex
	pools   = map[string]*pgxpool.Pool{}
)

// adminPool returns the shared pool for dsn.
func adminPool(dsn string) (*pgxpool.Pool, error) {
	poolsMu.Lock()
	defer poolsMu.Unlock()
	if p, ok := pools[dsn]; ok {
		return p, nil
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 4
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	pools[dsn] = p
	return p, nil
}

// schemaName builds test_<test name, sanitized>_<random>: unique, at most 63
// bytes, and readable in a leftover listing.
func schemaName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 32 {
			break
		}
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	return "test_" + b.String() + "_" + hex.EncodeToString(rnd[:])
}

// redact hides the password of a DSN for error messages: a URL loses its
// password, a keyword/value string is named by its variable only.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || !strings.Contains(dsn, "://") {
		return EnvDSN
	}
	return u.Redacted()
}

// isDeadlock reports whether err is PostgreSQL's deadlock_detected.
func isDeadlock(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40P01"
}
