package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
)

// TestExplainHistory: explain --history prints a target's recorded
// decisions, and each decision's snapshot replays through decide to the
// version it chose.
func TestExplainHistory(t *testing.T) {
	dsn, be, ch := demoSchema(t)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, err := runRoot(t, "versions", "create", "web", "v9", "--dsn", dsn)
	require.NoError(t, err)
	eng := engine.New(be.queue, engine.Options{Logger: log})
	ch.Register(eng, 1)
	_, err = eng.Drain(ctx)
	require.NoError(t, err)

	out, err := runRoot(t, "explain", "web:prod:eu-1", "--history", "--dsn", dsn)
	require.NoError(t, err)
	require.Contains(t, out, "target web:prod:eu-1:")
	require.Contains(t, out, "#1 ")

	out, err = runRoot(t, "explain", "web:dev:eu-1", "--history", "-o", "json", "--limit", "1", "--dsn", dsn)
	require.NoError(t, err)
	var ds []ports.TargetDecision
	require.NoError(t, json.Unmarshal([]byte(out), &ds))
	require.Len(t, ds, 1)
	require.NotNil(t, ds[0].Snapshot)
	snap, err := json.Marshal(ds[0].Snapshot)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "decision.json")
	require.NoError(t, os.WriteFile(file, snap, 0o600))
	out, err = runRoot(t, "decide", file)
	require.NoError(t, err)
	var got targetReplay
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Equal(t, ds[0].VersionID, got.VersionID, "the recorded decision replays to the same version")
	require.Equal(t, ds[0].Reasons, got.Reasons)

	_, err = runRoot(t, "explain", "web:prod:nowhere", "--history", "--dsn", dsn)
	requireExit(t, err, 4, "not found")
}

// TestDecideTargetBadInput: a release target's snapshot with an unknown
// field is refused with exit 2, naming it.
func TestDecideTargetBadInput(t *testing.T) {
	_, _, err := runDecide(t, `{"kind":"release-target","bogus":1}`, "-")
	requireExit(t, err, 2, "bogus")
	out, _, err := runDecide(t, `{"kind":"release-target","target":{"deployment_id":"d","environment_id":"e","resource_id":"r"},"policies":[],"base":{"now":"2026-01-01T00:00:00Z"},"candidates":[{"version":{"id":"v1","deployment_id":"d","tag":"v1","status":"ready"}}]}`, "-o", "text", "-")
	require.NoError(t, err)
	require.Contains(t, out, "release-target/d:e:r: newest-allowed v1")
}
