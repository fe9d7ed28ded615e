package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCatalogEditProcessesRace starts N `reconciler catalog edit` processes
// at once on the same draft with the same --version, each with its own
// document. Exactly one exits 0; every other exits 3 with a conflict (a
// held try-lock or a lost compare-and-swap); the stored document is the
// winner's, so no update is lost. Several rounds, each at the version the
// previous one left.
func TestCatalogEditProcessesRace(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	t.Parallel()
	bin, err := buildBinary()
	require.NoError(t, err)
	c := setupCatalog(t)
	const (
		obj     = "policy/gate"
		writers = 8
		rounds  = 3
	)
	// The binary's own migrations, which the processes then skip so they
	// reach the catalog together rather than in migration-lock turns.
	out, err := exec.Command(bin, "migrate", "up", "--dsn", c.dsn).CombinedOutput()
	require.NoError(t, err, "%s", out)
	c.ok(policyJSON("initial"), "create", obj, "-f", "-")
	dir := t.TempDir()
	files := make([]string, writers)

	lockConflicts, casConflicts := 0, 0
	for round := range rounds {
		before := c.get(obj)
		for i := range files {
			files[i] = filepath.Join(dir, fmt.Sprintf("r%d-w%d.json", round, i))
			require.NoError(t, os.WriteFile(files[i], []byte(policyJSON(fmt.Sprintf("round %d writer %d", round, i))), 0o600))
		}
		cmds := make([]*exec.Cmd, writers)
		stderr := make([]bytes.Buffer, writers)
		for i := range cmds {
			cmds[i] = exec.Command(bin, "catalog", "edit", obj, "-f", files[i],
				"--version", fmt.Sprint(before.Version), "--dsn", c.dsn, "--migrate=false")
			cmds[i].Stderr = &stderr[i]
		}
		// Start every process before waiting for any.
		var start sync.WaitGroup
		startErrs := make([]error, writers)
		for i, cmd := range cmds {
			start.Go(func() { startErrs[i] = cmd.Start() })
		}
		start.Wait()
		require.NoError(t, errors.Join(startErrs...))
		winners := []int{}
		for i, cmd := range cmds {
			err := cmd.Wait()
			var ee *exec.ExitError
			switch {
			case err == nil:
				winners = append(winners, i)
				continue
			case !errors.As(err, &ee):
				t.Fatalf("writer %d: %v", i, err)
			}
			msg := stderr[i].String()
			require.Equal(t, 3, ee.ExitCode(), "writer %d: %s", i, msg)
			require.True(t, strings.HasPrefix(msg, "reconciler: conflict: "), "writer %d: %s", i, msg)
			if strings.Contains(msg, "in progress") {
				lockConflicts++
			} else {
				require.Contains(t, msg, fmt.Sprintf("expected version %d", before.Version))
				casConflicts++
			}
		}
		require.Len(t, winners, 1, "exactly one writer wins round %d", round)
		after := c.get(obj)
		want, err := os.ReadFile(files[winners[0]])
		require.NoError(t, err)
		// The catalog keeps a document byte for byte (ports.Revision.Content);
		// `get -o json` re-indents it inside the JSON it prints, `-o content`
		// prints it as stored.
		require.JSONEq(t, string(want), string(after.Content), "the stored document is the winner's")
		stored := c.ok("", "get", obj, "-o", "content").stdout
		require.Equal(t, string(want)+"\n", stored, "the winner's document is stored byte for byte")
		require.Equal(t, before.Version+1, after.Version, "one write per round")
		require.Equal(t, before.ID, after.ID)
	}
	t.Logf("losers: %d held the try-lock, %d lost the version check", lockConflicts, casConflicts)
}
