package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// TestKillServeAdoptsItsRunningAgent: `serve --dsn` with the process
// runtime launches a standalone run's agent; once the run is running and
// the agent's process is up, serve is SIGKILLed. The agent survives (it
// runs under its own supervisor, in its own session); a restarted serve on
// the same --agent-workdir adopts it instead of launching a second one,
// and when the agent exits 7 the run fails with that exit code.
func TestKillServeAdoptsItsRunningAgent(t *testing.T) {
	t.Parallel()
	bin, dsn, token := dsnWithRunsToken(t)

	workdir := t.TempDir()
	// The agent records its pid, then waits for the test's word and exits 7.
	agent := `echo $$ > pid.tmp && mv pid.tmp pid; while [ ! -e go ]; do sleep 0.05; done; exit 7`
	serve := func(name string) (*exec.Cmd, *procLog, *client.Client) {
		log := &procLog{keep: []string{"listening", "agent."}}
		cmd := exec.Command(bin, "serve", "--dsn", dsn, "--listen", "127.0.0.1:0", "--lock", "2s",
			"--agent-command", "sh", "--agent-arg=-c", "--agent-arg", agent, "--agent-workdir", workdir)
		cmd.Env = append(os.Environ(), "RECONCILER_DSN=")
		startProcessLog(t, cmd, "engine starting", name, log)
		return cmd, log, serveClient(t, log, token)
	}
	ctx := context.Background()
	ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "nightly-crash"}
	first, firstLog, c := serve("serve-1")
	_, err := c.CreateRun(ctx, api.RunCreate{Kind: ref.Kind, ID: ref.ID, Workflow: "nightly"})
	require.NoError(t, err)

	// The moment: the run is running and its agent process is up.
	pidFile := filepath.Join(workdir, string(ref.Kind), ref.ID, "pid")
	var pid int
	waitUntil(t, 60*time.Second, func() bool {
		row, err := c.Run(ctx, ref, 0)
		require.NoError(t, err)
		b, err := os.ReadFile(pidFile)
		if row.State != reconcile.StandaloneRunning || err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err)
		return true
	})
	require.NoError(t, syscall.Kill(pid, 0), "the agent runs")
	pgid, err := syscall.Getpgid(pid)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	require.NotEqual(t, first.Process.Pid, pgid, "the agent is not in serve's process group")
	require.Len(t, firstLog.matching("msg=agent.start kind=standalone id="+ref.ID), 1)

	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	require.NoError(t, syscall.Kill(pid, 0), "the agent survived serve's SIGKILL")

	_, secondLog, c := serve("serve-2")
	waitUntil(t, 30*time.Second, func() bool { return len(secondLog.matching("msg=agent.adopt kind=standalone id="+ref.ID)) == 1 })
	require.NoError(t, os.WriteFile(filepath.Join(workdir, string(ref.Kind), ref.ID, "go"), nil, 0o600))
	waitUntil(t, 60*time.Second, func() bool {
		row, err := c.Run(ctx, ref, 0)
		require.NoError(t, err)
		return row.State == reconcile.StandaloneFailed
	})
	row, err := c.Run(ctx, ref, 0)
	require.NoError(t, err)
	require.NotNil(t, row.Pod)
	require.Equal(t, reconcile.PodTerminated, row.Pod.Phase)
	require.NotNil(t, row.Pod.ExitCode)
	require.Equal(t, 7, *row.Pod.ExitCode, "the agent's real exit code")
	require.Empty(t, secondLog.matching("msg=agent.start"), "the restarted serve launched nothing")
	require.Len(t, firstLog.matching("msg=agent.start"), 1, "one launch in all")
	require.Error(t, syscall.Kill(pid, 0), "the agent has ended")
}
