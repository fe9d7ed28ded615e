package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
)

// TestAgentRuntimeFlagsAreChecked: a bad --runtime or kubernetes flag is
// a usage error (exit 2) naming the flag, before anything starts.
func TestAgentRuntimeFlagsAreChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("spec:\n  containerz: []\n"), 0o600))
	always := filepath.Join(dir, "always.yaml")
	require.NoError(t, os.WriteFile(always, []byte("spec:\n  restartPolicy: Always\n  containers: [{name: a, image: busybox}]\n"), 0o600))
	base := func() agentOptions {
		return agentOptions{runtime: runtimeKubernetes, workRoot: dir, stopGrace: time.Second, heartbeat: time.Second,
			kube: kubeOptions{namespace: "agents", image: "busybox", kubeconfigRef: "env:RECONCILER_SECRET_NO_SUCH_KUBECONFIG"}}
	}
	for want, mutate := range map[string]func(*agentOptions){
		"--runtime":             func(o *agentOptions) { o.runtime = "docker" },
		"--kube-namespace":      func(o *agentOptions) { o.kube.namespace = "" },
		"--kube-image":          func(o *agentOptions) { o.kube.image = "" },
		"containerz":            func(o *agentOptions) { o.kube.podTemplate = bad },
		"restartPolicy":         func(o *agentOptions) { o.kube.podTemplate = always },
		"--agent-secret":        func(o *agentOptions) { o.secrets = []string{"TOKEN=env:RECONCILER_SECRET_TOKEN"} },
		"--kube-kubeconfig-ref": func(*agentOptions) {},
	} {
		o := base()
		mutate(&o)
		_, err := newAgentRuntime(t.Context(), o, nil, nil, ports.SecretResolver(nil), ports.SystemClock, nil, nil)
		require.ErrorContains(t, err, want)
		var u usageError
		require.True(t, errors.As(err, &u), "%s: a usage error (exit 2): %v", want, err)
	}
}
