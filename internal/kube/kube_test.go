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

// TestCheckPodSecurityRefusesEachWayOntoTheNode: finding 1 of issue 28 ran
// privileged, hostPath and hostNetwork pods through kubernetes-job with a
// write token; each rule refuses naming its field.
func TestCheckPodSecurityRefusesEachWayOntoTheNode(t *testing.T) {
	t.Parallel()
	yes := true
	ctr := func(sc *corev1.SecurityContext) []corev1.Container {
		return []corev1.Container{{Name: "ok", Image: "busybox"}, {Name: "x", Image: "busybox", SecurityContext: sc}}
	}
	for _, tc := range []struct {
		name, field string
		spec        corev1.PodSpec
	}{
		{"plain pod", "", corev1.PodSpec{Containers: ctr(&corev1.SecurityContext{RunAsNonRoot: &yes,
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}})}},
		{"hostNetwork", "spec.hostNetwork", corev1.PodSpec{HostNetwork: true}},
		{"hostPID", "spec.hostPID", corev1.PodSpec{HostPID: true}},
		{"hostIPC", "spec.hostIPC", corev1.PodSpec{HostIPC: true}},
		{"hostPath volume", "spec.volumes[1].hostPath", corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}}},
		{"privileged", "spec.containers[1].securityContext.privileged", corev1.PodSpec{Containers: ctr(&corev1.SecurityContext{Privileged: &yes})}},
		{"allowPrivilegeEscalation", "spec.containers[1].securityContext.allowPrivilegeEscalation",
			corev1.PodSpec{Containers: ctr(&corev1.SecurityContext{AllowPrivilegeEscalation: &yes})}},
		{"added capabilities", "spec.containers[1].securityContext.capabilities.add",
			corev1.PodSpec{Containers: ctr(&corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}})}},
		{"privileged init container", "spec.initContainers[0].securityContext.privileged",
			corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i", SecurityContext: &corev1.SecurityContext{Privileged: &yes}}}}},
		{"privileged ephemeral container", "spec.ephemeralContainers[0].securityContext.privileged",
			corev1.PodSpec{EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "e", SecurityContext: &corev1.SecurityContext{Privileged: &yes}}}}}},
		{"windows host process", "spec.securityContext.windowsOptions.hostProcess",
			corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: &yes}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &configmap.Reader{Prefix: "job_agent_config.template", Map: map[string]any{}}
			CheckPodSecurity(r, "spec", &tc.spec)
			if tc.field == "" {
				require.NoError(t, r.Err)
				return
			}
			var fe *release.FieldError
			require.ErrorAs(t, r.Err, &fe)
			require.Equal(t, "job_agent_config.template."+tc.field, fe.Field)
			require.Contains(t, fe.Msg, "refused")
		})
	}
}
