package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
)

// leafCommands lists every runnable command of the tree as its path of
// names ("workflow run"), sorted.
func leafCommands(root *cobra.Command) [][]string {
	var out [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			p := append(slices.Clone(path), sub.Name())
			if sub.Runnable() {
				out = append(out, p)
			}
			walk(sub, p)
		}
	}
	walk(root, nil)
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(strings.Join(a, " "), strings.Join(b, " ")) })
	return out
}

// badRun is one command line of the campaign and what its error must
// name.
type badRun struct {
	args  []string
	stdin string
	names string // the error names this (a flag, a field, a file)
}

// campaignRun runs args in the process with a deadline (a hang fails the
// test), returning the exit status and the error text.
func campaignRun(t *testing.T, stdin string, args []string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	require.NoError(t, ctx.Err(), "%q did not return within 20 s", args)
	msg := errOut.String()
	if err != nil {
		msg += err.Error()
	}
	return exitStatus(err), msg
}

// fingerprint digests the rows of every table of the schema behind dsn,
// so any insert, update or delete shows.
func fingerprint(t *testing.T, dsn, schema string) map[string]string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, schema)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, tables)
	out := map[string]string{}
	for _, tb := range tables {
		var digest string
		q := `SELECT count(*) || ':' || coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '') FROM ` + pgx.Identifier{schema, tb}.Sanitize() + ` t`
		require.NoError(t, conn.QueryRow(t.Context(), q).Scan(&digest))
		out[tb] = digest
	}
	return out
}

// TestBadInputCampaign runs every command of the CLI with bad input: an
// unknown flag, a value no number, duration or boolean flag takes, a range
// or choice a flag refuses, positional arguments a command does not take,
// and missing, empty, oversized or malformed files. Each must exit 2 with
// a message naming the flag, argument or file, within the deadline,
// without a panic and without echoing a control character raw; and the
// database every command was pointed at
// (--dsn, migrated, with data) is unchanged at the end.
func TestBadInputCampaign(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.Schema(t)
	db, err := postgres.Open(t.Context(), dsn)
	require.NoError(t, err)
	require.NoError(t, db.MigrateUp(t.Context()))
	db.Close()
	// Some data, so a wrong write or delete would show.
	tmpl := "../../testdata/demo/rollout.yaml"
	for _, args := range [][]string{
		{"token", "create", "--name", "campaign", "--scope", "read", "--dsn", dsn},
		{"catalog", "create", "workflow-template/rollout", "-f", tmpl, "--dsn", dsn},
	} {
		code, msg := campaignRun(t, "", args)
		require.Equal(t, 0, code, msg)
	}
	before := fingerprint(t, dsn, schema)

	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.yaml")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	garbage := filepath.Join(dir, "garbage.yaml")
	require.NoError(t, os.WriteFile(garbage, []byte("{{{ not: [yaml\n"), 0o600))
	missing := filepath.Join(dir, "missing.yaml")

	root := newRootCmd()
	var runs []badRun
	for _, path := range leafCommands(root) {
		cmd, _, err := root.Find(path)
		require.NoError(t, err)
		with := func(extra ...string) []string {
			args := append(slices.Clone(path), extra...)
			if cmd.Flags().Lookup("dsn") != nil {
				args = append(args, "--dsn", dsn)
			}
			return args
		}
		runs = append(runs, badRun{args: with("--no-such-flag"), names: "--no-such-flag"})
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			switch f.Value.Type() {
			case "duration", "int", "int64", "uint", "uint64", "float64", "bool", "int32":
				runs = append(runs, badRun{args: with("--" + f.Name + "=bogus"), names: "--" + f.Name})
			}
		})
		runs = append(runs, badRun{args: with("x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8"), names: "x1|arg"})
	}
	for _, file := range []string{missing, empty, garbage, dir, "/dev/zero"} {
		for _, args := range [][]string{
			{"decide", file},
			{"workflow", "validate", file},
			{"catalog", "create", "workflow-template/x", "-f", file, "--dsn", dsn},
			{"catalog", "edit", "workflow-template/x", "-f", file, "--version", "1", "--dsn", dsn},
		} {
			runs = append(runs, badRun{args: args, names: filepath.Base(file)})
		}
		if file != missing { // a name that is no file is a catalog name
			runs = append(runs, badRun{args: []string{"workflow", "run", file, "--dsn", dsn}, names: filepath.Base(file)})
		}
	}
	ansi := "v\x1b[31m"
	runs = append(runs, []badRun{
		// Choices and ranges a flag refuses.
		{args: []string{"decide", "-o", "bogus", "-"}, names: "-o"},
		{args: []string{"get", "versions", "-o", "bogus", "--dsn", dsn}, names: "bogus"},
		{args: []string{"workflow", "status", "w", "-o", "bogus", "--dsn", dsn}, names: "bogus"},
		{args: []string{"catalog", "list", "--kind", "bogus", "--dsn", dsn}, names: "bogus"},
		{args: []string{"catalog", "get", "workflow-template/x", "-o", "bogus", "--dsn", dsn}, names: "bogus"},
		{args: []string{"serve", "--log-format", "bogus", "--dsn", dsn}, names: "--log-format"},
		{args: []string{"serve", "--log-level", "bogus", "--dsn", dsn}, names: "--log-level"},
		{args: []string{"serve", "--lock", "1ns", "--dsn", dsn}, names: "--lock"},
		{args: []string{"serve", "--concurrency", "0", "--dsn", dsn}, names: "--concurrency"},
		{args: []string{"serve", "--insecure-no-auth", "--listen", "0.0.0.0:0", "--dsn", dsn}, names: "--insecure-no-auth"},
		{args: []string{"serve", "--otlp-endpoint", "127.0.0.1:4318", "--dsn", dsn}, names: "--otlp-endpoint"},
		{args: []string{"token", "create", "--name", "n", "--scope", "bogus", "--dsn", dsn}, names: "bogus"},
		{args: []string{"token", "create", "--scope", "read", "--dsn", dsn}, names: "--name"},
		{args: []string{"healthcheck", "--url", "ftp://x"}, names: "--url"},
		{args: []string{"jobs", "report", "j1", "--status", "bogus", "--dsn", dsn}, names: "status"},
		// Names, ids and fields.
		{args: []string{"versions", "create", "web", ansi, "--dsn", dsn}, names: "tag"},
		{args: []string{"versions", "create", "web", strings.Repeat("v", 2000), "--dsn", dsn}, names: "tag"},
		{args: []string{"approve", ansi, "prod", "--dsn", dsn}, names: "version_id"},
		{args: []string{"explain", "no-colons", "--dsn", dsn}, names: "no-colons"},
		{args: []string{"workflow", "run", tmpl, "--param", "no-equals", "--dsn", dsn}, names: "--param"},
		{args: []string{"workflow", "run", tmpl, "--id", "a/b", "--param", "image=x", "--dsn", dsn}, names: "id"},
		{args: []string{"workflow", "run", tmpl, "--id", ansi, "--param", "image=x", "--dsn", dsn}, names: "id"},
		{args: []string{"workflow", "run", tmpl, "--dsn", dsn}, names: "image"},
		{args: []string{"catalog", "create", "bogus/x", "-f", tmpl, "--dsn", dsn}, names: "kind"},
		{args: []string{"catalog", "create", "workflow-template/UPPER", "-f", tmpl, "--dsn", dsn}, names: "name"},
		{args: []string{"catalog", "create", "workflow-template/" + ansi, "-f", tmpl, "--dsn", dsn}, names: "name"},
		{args: []string{"catalog", "label", "workflow-template/rollout", "k=" + ansi, "--version", "1", "--dsn", dsn}, names: "k"},
		{args: []string{"dead", "redrive", "k", "t", ansi, "--dsn", dsn}, names: "SCOPE_ID"},
		// Issue 29: the remaining CLI cases.
		{args: []string{"workflow", "run", tmpl, "--param", "image=", "--dsn", dsn}, names: "image"},
		{args: []string{"workflow", "run", tmpl, "--param", "image=a", "--param", "image=b", "--dsn", dsn}, names: "--param image"},
		{args: []string{"workflow", "run", tmpl, "--param", "image=" + ansi, "--dsn", dsn}, names: "--param"},
		{args: []string{"workflow", "run", tmpl, "--param", "image=x", "--system", "nosuch", "--dsn", dsn}, names: "nosuch"},
		{args: []string{"catalog", "label", "workflow-template/rollout", "bad key!=v", "--version", "1", "--dsn", dsn}, names: "bad key!"},
		{args: []string{"decide", "-"}, stdin: nulSnapshot, names: "NUL"},
		{args: []string{"decide", "-"}, stdin: strings.Replace(badSnapshot, "LIMIT", "-1", 1), names: "global_limit"},
		{args: []string{"decide", "-"}, stdin: badAgentSnapshot, names: "pending_messages"},
		{args: []string{"workflow", "validate", "-"}, stdin: nulTemplate, names: "1 problems"}, // listed on stdout: TestLoadRefusesNUL
		{args: []string{"catalog", "create", "workflow-template/nul", "-f", "-", "--dsn", dsn}, stdin: nulTemplate, names: "NUL"},
		{args: []string{"serve", "--secret-dir", "/nonexistent", "--dsn", dsn}, names: "--secret-dir"},
	}...)

	var report []string
	for _, r := range runs {
		code, msg := campaignRun(t, r.stdin, r.args)
		line := fmt.Sprintf("%d %q: %s", code, strings.Join(r.args, " "), firstLine(msg))
		if code != 2 || !containsAny(msg, strings.Split(r.names, "|")) || strings.ContainsRune(msg, 0x1b) {
			report = append(report, line)
		}
	}
	require.Empty(t, report, "of %d runs, these did not exit 2 naming the flag, argument or field (or echoed an escape raw)", len(runs))
	require.Greater(t, len(runs), 200)
	require.Equal(t, before, fingerprint(t, dsn, schema), "bad input changed the database")
}

// The issue 29 inputs: a snapshot with a NUL in its run id, one with a
// negative global_limit (LIMIT), an agent's with negative
// pending_messages, and a template holding a NUL.
const (
	badSnapshot      = `{"kind":"standalone","now":"2026-01-01T00:00:00Z","run":{"id":"s1","state":"queued"},"capacity":{"global_limit":LIMIT}}`
	nulSnapshot      = `{"kind":"standalone","now":"2026-01-01T00:00:00Z","run":{"id":"s\u00001","state":"queued"}}`
	badAgentSnapshot = `{"kind":"persistent-agent","now":"2026-01-01T00:00:00Z","run":{"id":"a1","state":"idle","pending_messages":-3}}`
	nulTemplate      = `{"apiVersion":"reconciler.dev/v1","kind":"WorkflowTemplate","metadata":{"name":"nul"},"spec":{"tasks":[{"name":"a\u0000b","type":"approval"}]}}`
)

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.ReplaceAll(s, dsnMarker, "DSN")
}

const dsnMarker = "postgres://"
