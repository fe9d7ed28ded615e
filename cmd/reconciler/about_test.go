package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
)

// TestReadBuildInfo: the module version and the VCS stamp come from the
// build information; without any, the version is "unknown".
func TestReadBuildInfo(t *testing.T) {
	t.Parallel()
	got := readBuildInfo(func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Path: "github.com/reconcilerhq/reconciler", Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-11-23T16:00:00Z"},
				{Key: "vcs.modified", Value: "true"}, {Key: "-trimpath", Value: "true"}}}, true
	})
	platform := runtime.GOOS + "/" + runtime.GOARCH
	require.Equal(t, buildInfo{Version: "v1.2.3", Revision: "0123456789abcdef0123", Time: "2026-11-23T16:00:00Z", Modified: true,
		GoVersion: "go1.99", Platform: platform}, got)
	require.Equal(t, "v1.2.3 (0123456789ab, modified) go1.99 "+platform, got.String())

	none := readBuildInfo(func() (*debug.BuildInfo, bool) { return nil, false })
	require.Equal(t, "unknown", none.Version)
	require.Equal(t, "unknown "+runtime.Version()+" "+platform, none.String())
}

// TestVersionFlagAndAbout: --version prints the build on one line, about
// reports it (also as JSON), and the `versions` command group creates
// deployment versions.
func TestVersionFlagAndAbout(t *testing.T) {
	t.Parallel()
	want := currentBuild()
	res := runCLI(t, "", "--version")
	require.Equal(t, 0, res.code, res.stderr)
	require.Equal(t, "reconciler "+want.String()+"\n", res.stdout)

	res = runCLI(t, "", "about", "--json")
	require.Equal(t, 0, res.code, res.stderr)
	var got buildInfo
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &got))
	require.Equal(t, want, got)
	require.NotEmpty(t, got.GoVersion)

	res = runCLI(t, "", "about", "extra")
	require.Equal(t, 2, res.code)

	res = runCLI(t, "", "versions", "create", "--help")
	require.Equal(t, 0, res.code, res.stderr)
	require.Contains(t, res.stdout, "reconciler versions create")
}

// TestCompletion: cobra's generator writes a completion script for bash,
// zsh and fish; an unknown shell is a usage error.
func TestCompletion(t *testing.T) {
	t.Parallel()
	for shell, marker := range map[string]string{"bash": "# bash completion V2 for reconciler", "zsh": "#compdef reconciler",
		"fish": "# fish completion for reconciler"} {
		res := runCLI(t, "", "completion", shell)
		require.Equal(t, 0, res.code, "%s: %s", shell, res.stderr)
		require.True(t, strings.HasPrefix(res.stdout, marker), "%s script starts with %q: %.80s", shell, marker, res.stdout)
		require.Contains(t, res.stdout, "__complete", "%s: completes names by asking the binary", shell)
	}
	res := runCLI(t, "", "completion", "tcsh")
	require.Equal(t, 2, res.code)
	require.ErrorContains(t, res.err, `unknown shell "tcsh"`)
}

// TestLinkedVersionWins: a version set at link time (the image's
// -ldflags -X main.linkedVersion) replaces the module version; unset, the
// module version stays.
func TestLinkedVersionWins(t *testing.T) {
	t.Parallel()
	b := buildInfo{Version: "(devel)", GoVersion: "go1.26.8", Platform: "linux/amd64"}
	require.Equal(t, "v1.2.3", b.linked("v1.2.3").Version)
	require.Equal(t, "(devel)", b.linked("").Version)
	require.Equal(t, "v1.2.3 go1.26.8 linux/amd64", b.linked("v1.2.3").String())
}

// TestNameCompletionFromTheAPI: the shell completion of `get workflow`
// asks the API (here in process on --dsn) for the workflow ids and offers
// those starting with what was typed, and no file names.
func TestNameCompletionFromTheAPI(t *testing.T) {
	t.Parallel()
	dsn, _ := pgtest.Schema(t)
	be, err := openBackend(t.Context(), dsn, true, ports.SystemClock)
	require.NoError(t, err)
	t.Cleanup(be.close)
	c := &flow.Controller{Store: be.workflows, Queue: be.queue, Releases: be.releases, Clock: ports.SystemClock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, id := range []string{"alpha-1", "alpha-2", "beta-1"} {
		_, err := c.Start(t.Context(), flow.StartParams{ID: id, Template: []byte(fastJobsTemplate)})
		require.NoError(t, err)
	}
	res := runCLI(t, "", "__complete", "get", "workflow", "--dsn", dsn, "alp")
	require.Equal(t, 0, res.code, res.stderr)
	require.Equal(t, "alpha-1\nalpha-2\n:4\n", res.stdout, "the matching ids, then ShellCompDirectiveNoFileComp")
	res = runCLI(t, "", "__complete", "get", "workflow", "--dsn", "postgres://127.0.0.1:1/none?connect_timeout=1", "")
	require.Equal(t, 0, res.code, res.stderr)
	require.Equal(t, ":5\n", res.stdout, "no API: nothing offered, an error directive, no file names")
}

// TestVersionCommandPrintsTheBuild: `reconciler version` prints the same
// line as --version and nothing else; given the old deployment-version
// subcommand it is bad input pointing at `versions`.
func TestVersionCommandPrintsTheBuild(t *testing.T) {
	t.Parallel()
	res := runCLI(t, "", "version")
	require.Equal(t, 0, res.code, res.stderr)
	flag := runCLI(t, "", "--version")
	require.Equal(t, flag.stdout, res.stdout)
	require.True(t, strings.HasPrefix(res.stdout, "reconciler "), res.stdout)
	res = runCLI(t, "", "version", "extra")
	require.Equal(t, 2, res.code, "an argument is bad input")
	res = runCLI(t, "", "version", "create", "web", "v1")
	require.Equal(t, 2, res.code)
	require.ErrorContains(t, res.err, "reconciler versions create")
}
