package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runDecide runs `decide args...` with stdin and returns stdout, stderr and
// the error main would exit on.
func runDecide(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := newDecideCmd()
	var out, errOut bytes.Buffer
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

// TestDecideReplaysGolden replays every recorded snapshot through the CLI
// and requires the JSON line to carry the golden decision.
func TestDecideReplaysGolden(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../testdata/snapshots/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out, _, err := runDecide(t, "", files...)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, len(files), "one JSON line per snapshot")
	for i, f := range files {
		want, err := os.ReadFile(filepath.Join(filepath.Dir(f), "golden", filepath.Base(f)))
		require.NoError(t, err)
		require.JSONEq(t, string(want), lines[i], f)
	}
}

// TestDecideText prints one line per snapshot, prefixed by its file name
// when there are several.
func TestDecideText(t *testing.T) {
	t.Parallel()
	f := "../../testdata/snapshots/repo-pr-auto-merge.json"
	out, _, err := runDecide(t, "", "-o", "text", f)
	require.NoError(t, err)
	require.Equal(t, "repo/task-v: autoMergePr head_sha=a1b2c3d4e5f6 pr_url=https://git.example.com/acme/api/pull/7 (reason: auto-merge-ready)\n", out)
	out, _, err = runDecide(t, "", "-o", "text", f, f)
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(out, f+": repo/task-v: autoMergePr"))
}

// TestDecideBadInput: every kind of bad input is a usage error (exit 2)
// naming what is wrong, never a panic.
func TestDecideBadInput(t *testing.T) {
	t.Parallel()
	good, err := os.ReadFile("../../testdata/snapshots/repo-queued-capacity.json")
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(good, &doc))
	tests := []struct {
		name, stdin, want string
		args              []string
	}{
		{"truncated JSON", `{"kind":"repo",`, "syntax error", nil},
		{"syntax error position", "{\n  \"kind\": \"repo\",\n  x\n}", "line 3, column 3", nil},
		{"unknown kind", `{"kind":"nope"}`, `unknown kind "nope"`, nil},
		{"missing now", `{"kind":"repo"}`, "now: required", nil},
		{"unknown field", strings.Replace(string(good), `"state"`, `"stat"`, 1), `run.stat: unknown field "stat"`, nil},
		{"wrong type", strings.Replace(string(good), `"now": "`, `"now": 7, "x": "`, 1), "now", nil},
		{"not an object", `[1, 2]`, "", nil},
		{"empty input", ``, "", nil},
		{"bad output flag", string(good), "--output: want json or text", []string{"-o", "yaml"}},
		{"missing file", "", "no such file", []string{"/nonexistent/snapshot.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if len(args) == 0 || args[0] == "-o" {
				args = append(args, "-")
			}
			out, _, err := runDecide(t, tt.stdin, args...)
			requireUsage(t, err, tt.want)
			require.Empty(t, out)
		})
	}
}

// TestDecideManyFilesReportsEach: with several files, a bad one is reported
// and the good ones still print; the exit status is the bad one's.
func TestDecideManyFilesReportsEach(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"kind":"nope"}`), 0o644))
	good := "../../testdata/snapshots/repo-pr-auto-merge.json"
	out, errOut, err := runDecide(t, "", bad, good)
	requireUsage(t, err, "see above")
	require.Contains(t, errOut, `bad.json: kind: unknown kind "nope"`)
	require.Contains(t, out, `"type":"autoMergePr"`)
}
