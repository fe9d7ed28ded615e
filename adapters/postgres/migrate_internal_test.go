package postgres

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestParseMigrations(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name  string
		files map[string]string
		err   string // empty: valid
	}{
		{"valid and ordered", map[string]string{
			"m/0010_b.up.sql": "B", "m/0010_b.down.sql": "b", "m/0002_a.up.sql": "A", "m/0002_a.down.sql": "a"}, ""},
		{"missing down", map[string]string{"m/0001_a.up.sql": "A"}, "0001_a: no .down.sql"},
		{"missing up", map[string]string{"m/0001_a.down.sql": "a"}, "0001_a: no .up.sql"},
		{"empty up", map[string]string{"m/0001_a.up.sql": "", "m/0001_a.down.sql": "a"}, "no .up.sql file (or it is empty)"},
		{"bad file name", map[string]string{"m/first.up.sql": "A"}, "first.up.sql: want NNNN_name"},
		{"zero version", map[string]string{"m/0000_a.up.sql": "A", "m/0000_a.down.sql": "a"}, "version must be a positive"},
		{"two names", map[string]string{"m/0001_a.up.sql": "A", "m/0001_b.down.sql": "a"}, "two names"},
		{"same version twice", map[string]string{"m/1_a.up.sql": "A", "m/01_a.up.sql": "A"}, "two up files"},
	}
	for _, tt := range tests {
		fsys := fstest.MapFS{}
		for n, body := range tt.files {
			fsys[n] = file(body)
		}
		ms, err := parseMigrations(fsys, "m")
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, tt.name)
			continue
		}
		require.NoError(t, err, tt.name)
		require.Len(t, ms, 2)
		require.Equal(t, []int{2, 10}, []int{ms[0].version, ms[1].version}, "ordered by version, not by name")
		require.Equal(t, "A", ms[0].up)
		require.Equal(t, "a", ms[0].down)
	}
}

// TestEmbeddedMigrations: the shipped set parses, starts at 1 and
// increases, so a new file is numbered after the last. (Gaps are allowed
// while branches that hold the numbers between are merged.)
func TestEmbeddedMigrations(t *testing.T) {
	t.Parallel()
	ms, err := loadMigrations()
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	require.Equal(t, 1, ms[0].version)
	for i, m := range ms[1:] {
		require.Greater(t, m.version, ms[i].version, "migration %s is numbered %d", m.name, m.version)
	}
	require.Equal(t, "work_queue", ms[0].name)
}
