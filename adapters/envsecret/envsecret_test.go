package envsecret_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/envsecret"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("s3cr3t\n"), 0o600))
	outside := filepath.Join(t.TempDir(), "other")
	require.NoError(t, os.WriteFile(outside, []byte("nope"), 0o600))
	// Links: one out of the directory (refused, issue 28), one inside it
	// as Kubernetes mounts secrets (followed), one through a linked
	// directory that leaves it (refused).
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "escape")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "..data"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "..data", "key"), []byte("k8s\n"), 0o600))
	require.NoError(t, os.Symlink("..data/key", filepath.Join(dir, "key")))
	require.NoError(t, os.Symlink(filepath.Dir(outside), filepath.Join(dir, "outdir")))
	env := map[string]string{"RECONCILER_SECRET_TOKEN": "t0k3n", "RECONCILER_DSN": "postgres://u:pw@db"}
	r := envsecret.Resolver{Dirs: []string{dir}, Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}

	for ref, want := range map[string]string{
		"env:RECONCILER_SECRET_TOKEN":         "t0k3n",
		"file:" + filepath.Join(dir, "token"): "s3cr3t",
		"file:" + filepath.Join(dir, "key"):   "k8s",
	} {
		got, err := r.Resolve(t.Context(), release.SecretRef{Ref: ref})
		require.NoError(t, err, ref)
		require.Equal(t, want, got, ref)
	}
	for ref, why := range map[string]string{
		"env:RECONCILER_DSN":                            "only variables named RECONCILER_SECRET_*",
		"env:RECONCILER_SECRET_MISSING":                 "not set",
		"file:" + outside:                               "not under a configured secret directory",
		"file:" + dir + "/../" + "x":                    "not under a configured secret directory",
		"file:relative/token":                           "not under a configured secret directory",
		"file:" + filepath.Join(dir, "absent"):          "no such file",
		"file:" + filepath.Join(dir, "escape"):          "escapes",
		"file:" + filepath.Join(dir, "outdir", "other"): "escapes",
		"vault:kv/token":                                `unknown scheme "vault"`,
		"TOKEN":                                         "want env:NAME or file:/path",
	} {
		_, err := r.Resolve(t.Context(), release.SecretRef{Ref: ref})
		require.ErrorIs(t, err, envsecret.ErrUnresolved, ref)
		require.ErrorContains(t, err, why, ref)
		require.NotContains(t, err.Error(), "pw@db", "an error never carries a value")
	}
	_, err := r.Resolve(t.Context(), release.SecretRef{Ciphertext: "abc"})
	require.ErrorContains(t, err, "ciphertext")
}

// TestSecretResolverConformance runs the port's suite against secrets in
// the environment (env:NAME) and in files (file:/path).
func TestSecretResolverConformance(t *testing.T) {
	t.Parallel()
	t.Run("env", func(t *testing.T) {
		t.Parallel()
		porttest.SecretResolver(t, func(t *testing.T, secrets map[string]string) porttest.SecretFixture {
			env := map[string]string{"RECONCILER_DSN": "postgres://u:pw@db"}
			for name, v := range secrets {
				env[envsecret.DefaultPrefix+name] = v
			}
			return porttest.SecretFixture{
				Resolver: envsecret.Resolver{Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }},
				Ref: func(name string) release.SecretRef {
					return release.SecretRef{Ref: "env:" + envsecret.DefaultPrefix + name}
				},
				Missing: release.SecretRef{Ref: "env:" + envsecret.DefaultPrefix + "ABSENT"},
			}
		})
	})
	t.Run("file", func(t *testing.T) {
		t.Parallel()
		porttest.SecretResolver(t, func(t *testing.T, secrets map[string]string) porttest.SecretFixture {
			dir := t.TempDir()
			for name, v := range secrets {
				// Mounted secrets often end in a newline, which is dropped.
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600))
			}
			return porttest.SecretFixture{
				Resolver: envsecret.Resolver{Dirs: []string{dir}, Getenv: func(string) (string, bool) { return "", false }},
				Ref:      func(name string) release.SecretRef { return release.SecretRef{Ref: "file:" + filepath.Join(dir, name)} },
				Missing:  release.SecretRef{Ref: "file:" + filepath.Join(dir, "ABSENT")},
			}
		})
	})
}
