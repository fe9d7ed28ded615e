package process

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// TestProcessEnvironmentLacksServeSecrets: an agent's environment is the
// documented variables only, never the daemon's, so a secret in serve's
// environment does not reach it (issue 28, finding 8). Not parallel: it
// sets the canary in this process's environment.
func TestProcessEnvironmentLacksServeSecrets(t *testing.T) {
	t.Setenv("RECONCILER_SECRET_CANARY", "canary-5e3f")
	t.Setenv("RECONCILER_DSN", "postgres://u:canary-dsn@db")
	b := setup(t, `env > env.txt`, nil)
	ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "canary"}
	b.store.Set(ref, reconcile.StandaloneRunning)
	require.NoError(t, b.rt.AgentLaunch(context.Background(), ports.AgentLaunchParams{Ref: ref, Purpose: ports.PurposeResume, IdempotencyKey: "k"}))
	exited(t, b.proc(t, ref))
	env, err := os.ReadFile(filepath.Join(b.rt.WorkDir(ref), "env.txt"))
	require.NoError(t, err)
	require.NotContains(t, string(env), "canary-5e3f")
	require.NotContains(t, string(env), "canary-dsn")
	for _, line := range strings.Split(strings.TrimSpace(string(env)), "\n") {
		name, _, _ := strings.Cut(line, "=")
		if strings.HasPrefix(name, "RECONCILER_") {
			require.Contains(t, []string{"RECONCILER_RUN_KIND", "RECONCILER_RUN_ID", "RECONCILER_PURPOSE", "RECONCILER_TRIGGER", "RECONCILER_WORKDIR"}, name)
		}
	}
}

// TestProcessCredentialKeepsServeProcOutOfReach: with a Credential the
// agent runs as that user and cannot read the daemon's
// /proc/<pid>/environ. Needs root (skipped otherwise).
func TestProcessCredentialKeepsServeProcOutOfReach(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start agents as another user")
	}
	t.Setenv("RECONCILER_SECRET_CANARY", "canary-5e3f")
	// The supervisor is this test binary: copy it where the agent's user
	// may run it.
	bin := filepath.Join(t.TempDir(), "supervisor")
	copyFile(t, os.Args[0], bin)
	work := t.TempDir()
	for _, d := range []string{filepath.Dir(bin), filepath.Dir(filepath.Dir(bin)), work} {
		require.NoError(t, os.Chmod(d, 0o711))
	}
	script := `id -u > uid.txt; cat /proc/` + strconv.Itoa(os.Getpid()) + `/environ > leak.txt 2>/dev/null; echo $? > rc.txt`
	b := setup(t, script, func(c *Config) {
		c.Supervisor = []string{bin, SuperviseArg}
		c.WorkRoot = work
		c.Credential = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
	})
	ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "isolated"}
	b.store.Set(ref, reconcile.StandaloneRunning)
	require.NoError(t, b.rt.AgentLaunch(context.Background(), ports.AgentLaunchParams{Ref: ref, Purpose: ports.PurposeResume, IdempotencyKey: "k"}))
	exited(t, b.proc(t, ref))
	dir := b.rt.WorkDir(ref)
	uid, err := os.ReadFile(filepath.Join(dir, "uid.txt"))
	require.NoError(t, err)
	require.Equal(t, "65534", strings.TrimSpace(string(uid)))
	leak, _ := os.ReadFile(filepath.Join(dir, "leak.txt"))
	require.NotContains(t, string(leak), "canary-5e3f")
	rc, err := os.ReadFile(filepath.Join(dir, "rc.txt"))
	require.NoError(t, err)
	require.NotEqual(t, "0", strings.TrimSpace(string(rc)), "reading serve's environ failed")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}
