package pgtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
)

func TestWithSearchPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, dsn, want string
	}{
		{"url with query", "postgres://u@h:5432/db?sslmode=disable", "postgres://u@h:5432/db?search_path=s1&sslmode=disable"},
		{"url without query", "postgresql://u@h/db", "postgresql://u@h/db?search_path=s1"},
		{"url replaces a search path", "postgres://u@h/db?search_path=old", "postgres://u@h/db?search_path=s1"},
		{"keyword form", "host=h user=u dbname=db ", "host=h user=u dbname=db search_path=s1"},
	}
	for _, tt := range tests {
		got, err := pgtest.WithSearchPath(tt.dsn, "s1")
		require.NoError(t, err, tt.name)
		require.Equal(t, tt.want, got, tt.name)
		cfg, err := pgx.ParseConfig(got)
		require.NoError(t, err, "%s: pgx parses the result", tt.name)
		require.Equal(t, "s1", cfg.RuntimeParams["search_path"], tt.name)
	}
}

// TestSchemaIsolatedAndDropped: two schemas do not see each other's tables,
// connections through the returned DSN land in the schema, and the schema is
// gone once its test ends.
func TestSchemaIsolatedAndDropped(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	base := pgtest.DSN(t)
	var names []string
	for _, sub := range []string{"first", "second"} {
		t.Run(sub, func(t *testing.T) {
			dsn, schema := pgtest.Schema(t)
			require.True(t, strings.HasPrefix(schema, "test_"), schema)
			require.LessOrEqual(t, len(schema), 63, "fits a Postgres identifier")
			names = append(names, schema)
			conn, err := pgx.Connect(ctx, dsn)
			require.NoError(t, err)
			defer conn.Close(context.Background())
			var current string
			require.NoError(t, conn.QueryRow(ctx, "SELECT current_schema()").Scan(&current))
			require.Equal(t, schema, current)
			// The same unqualified name in each schema: no collision.
			_, err = conn.Exec(ctx, "CREATE TABLE probe (id int PRIMARY KEY); INSERT INTO probe VALUES (1)")
			require.NoError(t, err)
		})
	}
	require.Len(t, names, 2)
	require.NotEqual(t, names[0], names[1], "every schema is unique")

	conn, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var left int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = ANY($1)", names).Scan(&left))
	require.Zero(t, left, "schemas are dropped when their test ends")
}
