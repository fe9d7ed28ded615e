package kube

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster: {server: "https://10.0.0.1:6443"}
users:
- name: deployer
  user: {token: "s3cret-token"}
contexts:
- name: prod
  context: {cluster: prod, user: deployer}
current-context: prod
`

func TestConnectorBuildsOneClientPerKubeconfigAndNamesTheField(t *testing.T) {
	t.Parallel()
	k := &Connector{Secrets: configmap.Secrets{"file:/kube/prod": kubeconfig, "file:/kube/junk": "{not yaml"}, Field: "job_agent_config"}
	a, err := k.Client(t.Context(), Cluster{KubeconfigRef: "file:/kube/prod"})
	require.NoError(t, err)
	b, err := k.Client(t.Context(), Cluster{KubeconfigRef: "file:/kube/prod", Context: "prod"})
	require.NoError(t, err)
	require.NotSame(t, a, b, "another context is another client")
	again, err := k.Client(t.Context(), Cluster{KubeconfigRef: "file:/kube/prod"})
	require.NoError(t, err)
	require.Same(t, a, again)

	for _, tc := range []struct {
		c     Cluster
		field string
	}{
		{Cluster{KubeconfigRef: "file:/kube/prod", Context: "staging"}, "job_agent_config.context"},
		{Cluster{KubeconfigRef: "file:/kube/junk"}, "job_agent_config.kubeconfigRef"},
		{Cluster{KubeconfigRef: "file:/kube/missing"}, "job_agent_config.kubeconfigRef"},
	} {
		_, err := k.Client(t.Context(), tc.c)
		require.ErrorIs(t, err, release.ErrInvalid)
		require.ErrorContains(t, err, tc.field)
		require.NotContains(t, err.Error(), "s3cret-token", "a kubeconfig is never quoted")
	}
}

func TestPodTemplateIsDecodedStrictly(t *testing.T) {
	t.Parallel()
	r := &configmap.Reader{Prefix: "cfg", Map: map[string]any{"template": map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"a": "b"}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "x", "image": "busybox"}}}}}}
	tpl := PodTemplate(r, "template")
	require.NoError(t, r.Err)
	require.Equal(t, "busybox", tpl.Spec.Containers[0].Image)
	require.Equal(t, map[string]string{"a": "b"}, tpl.Labels)

	r = &configmap.Reader{Prefix: "cfg", Map: map[string]any{"template": map[string]any{"spec": map[string]any{"containerz": []any{}}}}}
	PodTemplate(r, "template")
	require.ErrorContains(t, r.Err, `cfg.template: not a pod template: json: unknown field "containerz"`)
}

func TestPodReason(t *testing.T) {
	t.Parallel()
	for want, p := range map[string]corev1.Pod{
		"Evicted: low on memory": {Status: corev1.PodStatus{Reason: "Evicted", Message: "low on memory"}},
		"container main OOMKilled (exit code 137)": {Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "side", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
			{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}}},
		"container main ImagePullBackOff no such image": {Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "main", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "no such image"}}}}}},
		"": {Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "main", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}},
	} {
		require.Equal(t, want, PodReason(&p))
	}
}
