package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// migrationFiles holds the numbered migrations: NNNN_name.up.sql and
// NNNN_name.down.sql for every version. Files use no schema names; the
// connection's search_path decides where the tables go.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockClass is the first key of the advisory lock that guards
// migrations; the second is a hash of the current schema, so schemas
// migrate independently and one schema migrates one process at a time.
const migrationLockClass = 0x7265636f // "reco"

// migrationsTable records the applied versions.
const migrationsTable = "reconciler_migrations"

// migration is one numbered up/down pair.
type migration struct {
	version  int
	name     string
	up, down string
}

// MigrationStatus is one migration's state in the database.
type MigrationStatus struct {
	// Version is the migration's number.
	Version int
	// Name is the part of the file name after the number.
	Name string
	// Applied reports whether the database has it.
	Applied bool
	// AppliedAt is when it was applied; zero when it is not.
	AppliedAt time.Time
	// Unknown marks a version the database has but this binary does not
	// (a newer binary applied it).
	Unknown bool
}

var migrationFileRE = regexp.MustCompile(`^(\d+)_([a-z0-9_]+)\.(up|down)\.sql$`)

// loadMigrations parses the embedded files once: every version has an up
// and a down file, and versions are unique and positive.
var loadMigrations = sync.OnceValues(func() ([]migration, error) {
	return parseMigrations(migrationFiles, "migrations")
})

// parseMigrations reads the migrations in dir of fsys, ordered by version.
func parseMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	byVersion := map[int]*migration{}
	for _, e := range entries {
		m := migrationFileRE.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %s: want NNNN_name.up.sql or NNNN_name.down.sql", e.Name())
		}
		v, err := strconv.Atoi(m[1])
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration file %s: version must be a positive number", e.Name())
		}
		body, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("migration file %s: %w", e.Name(), err)
		}
		mg := byVersion[v]
		if mg == nil {
			mg = &migration{version: v, name: m[2]}
			byVersion[v] = mg
		}
		if mg.name != m[2] {
			return nil, fmt.Errorf("migration %d has two names: %s and %s", v, mg.name, m[2])
		}
		dst := &mg.up
		if m[3] == "down" {
			dst = &mg.down
		}
		if *dst != "" {
			return nil, fmt.Errorf("migration file %s: version %d has two %s files", e.Name(), v, m[3])
		}
		*dst = string(body)
	}
	out := make([]migration, 0, len(byVersion))
	for _, mg := range byVersion {
		switch {
		case mg.up == "":
			return nil, fmt.Errorf("migration %04d_%s: no .up.sql file (or it is empty)", mg.version, mg.name)
		case mg.down == "":
			return nil, fmt.Errorf("migration %04d_%s: no .down.sql file (or it is empty)", mg.version, mg.name)
		}
		out = append(out, *mg)
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	return out, nil
}

// MigrateUp applies every migration the database lacks, in version order,
// each in its own transaction (its up file, then its Go step if it has
// one, see goMigrations). Concurrent callers on one schema wait for
// each other and every migration is applied once.
func (db *DB) MigrateUp(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	return db.withMigrationLock(ctx, func(conn *sql.Conn) error {
		applied, err := appliedMigrations(ctx, conn)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if _, ok := applied[m.version]; ok {
				continue
			}
			err := inConnTx(ctx, conn, func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, m.up); err != nil {
					return err
				}
				if step := goMigrations[m.version]; step != nil {
					if err := step(ctx, tx); err != nil {
						return err
					}
				}
				_, err := tx.ExecContext(ctx, "INSERT INTO "+migrationsTable+" (version, name, applied_at) VALUES ("+
					strconv.Itoa(m.version)+", '"+m.name+"', clock_timestamp())")
				return err
			})
			if err != nil {
				return fmt.Errorf("migrate up %04d_%s: %w", m.version, m.name, err)
			}
		}
		return nil
	})
}

// MigrateDown reverts the newest steps applied migrations, newest first,
// each in its own transaction. steps must be positive; asking for more than
// are applied reverts them all. A version this binary does not know cannot
// be reverted.
func (db *DB) MigrateDown(ctx context.Context, steps int) error {
	if steps <= 0 {
		return fmt.Errorf("migrate down: steps must be positive, got %d", steps)
	}
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	known := map[int]migration{}
	for _, m := range ms {
		known[m.version] = m
	}
	return db.withMigrationLock(ctx, func(conn *sql.Conn) error {
		applied, err := appliedMigrations(ctx, conn)
		if err != nil {
			return err
		}
		versions := make([]int, 0, len(applied))
		for v := range applied {
			versions = append(versions, v)
		}
		slices.Sort(versions)
		slices.Reverse(versions)
		for _, v := range versions[:min(steps, len(versions))] {
			m, ok := known[v]
			if !ok {
				return fmt.Errorf("migrate down %04d_%s: this binary has no such migration", v, applied[v].Name)
			}
			err := inConnTx(ctx, conn, func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, m.down); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, "DELETE FROM "+migrationsTable+" WHERE version = "+strconv.Itoa(v))
				return err
			})
			if err != nil {
				return fmt.Errorf("migrate down %04d_%s: %w", m.version, m.name, err)
			}
		}
		return nil
	})
}

// MigrateStatus lists every migration this binary knows and every one the
// database has, by version, with whether and when it was applied.
func (db *DB) MigrateStatus(ctx context.Context) ([]MigrationStatus, error) {
	ms, err := loadMigrations()
	if err != nil {
		return nil, err
	}
	conn, err := db.sqldb.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate status: %w", err)
	}
	defer conn.Close()
	applied, err := appliedMigrations(ctx, conn)
	if err != nil {
		return nil, err
	}
	out := make([]MigrationStatus, 0, len(ms))
	for _, m := range ms {
		st := MigrationStatus{Version: m.version, Name: m.name}
		if a, ok := applied[m.version]; ok {
			st.Applied, st.AppliedAt = true, a.AppliedAt
			delete(applied, m.version)
		}
		out = append(out, st)
	}
	for _, a := range applied {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b MigrationStatus) int { return a.Version - b.Version })
	return out, nil
}

// withMigrationLock runs fn on one dedicated connection that holds the
// schema's migration lock, creating the migrations table first.
func (db *DB) withMigrationLock(ctx context.Context, fn func(conn *sql.Conn) error) (err error) {
	conn, err := db.sqldb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	lockArgs := strconv.Itoa(migrationLockClass) + ", hashtext(coalesce(current_schema(), ''))"
	var got bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock("+lockArgs+")").Scan(&got); err != nil {
		return fmt.Errorf("migrate: take the migration lock: %w", err)
	}
	if !got {
		// Another session migrates this schema: say so, then wait.
		if db.lockWait != nil {
			var pid int
			_ = conn.QueryRowContext(ctx, `SELECT coalesce(max(pid), 0) FROM pg_locks
				WHERE locktype = 'advisory' AND granted AND classid = $1::bigint::oid
				AND objid::bigint = hashtext(coalesce(current_schema(), ''))::bigint & 4294967295 AND objsubid = 2`,
				migrationLockClass).Scan(&pid)
			db.lockWait(pid)
		}
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock("+lockArgs+")"); err != nil {
			return fmt.Errorf("migrate: wait for the migration lock held by another process: %w", err)
		}
	}
	defer func() {
		// A canceled ctx must not leave the lock held on a pooled
		// connection: unlock on a fresh context.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, uerr := conn.ExecContext(uctx, "SELECT pg_advisory_unlock("+lockArgs+")"); uerr != nil {
			// Ending the session is what releases the lock then.
			_ = conn.Raw(func(dc any) error {
				if c, ok := dc.(*stdlib.Conn); ok {
					return c.Conn().Close(uctx)
				}
				return nil
			})
			err = errors.Join(err, fmt.Errorf("migrate: release the migration lock: %w", uerr))
		}
	}()
	if _, err := conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+migrationsTable+` (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL
	)`); err != nil {
		return fmt.Errorf("migrate: create %s: %w", migrationsTable, err)
	}
	return fn(conn)
}

// appliedMigrations reads the migrations table; a missing table means none.
func appliedMigrations(ctx context.Context, conn *sql.Conn) (map[int]MigrationStatus, error) {
	var exists bool
	if err := conn.QueryRowContext(ctx, "SELECT to_regclass('"+migrationsTable+"') IS NOT NULL").Scan(&exists); err != nil {
		return nil, fmt.Errorf("migrate: read %s: %w", migrationsTable, err)
	}
	out := map[int]MigrationStatus{}
	if !exists {
		return out, nil
	}
	rows, err := conn.QueryContext(ctx, "SELECT version, name, applied_at FROM "+migrationsTable)
	if err != nil {
		return nil, fmt.Errorf("migrate: read %s: %w", migrationsTable, err)
	}
	defer rows.Close()
	for rows.Next() {
		var st MigrationStatus
		if err := rows.Scan(&st.Version, &st.Name, &st.AppliedAt); err != nil {
			return nil, fmt.Errorf("migrate: read %s: %w", migrationsTable, err)
		}
		st.Applied, st.Unknown, st.AppliedAt = true, true, st.AppliedAt.UTC()
		out[st.Version] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("migrate: read %s: %w", migrationsTable, err)
	}
	return out, nil
}

// inConnTx runs fn in a transaction on conn.
func inConnTx(ctx context.Context, conn *sql.Conn, fn func(tx *sql.Tx) error) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
