// Package kube is what the Kubernetes adapters (the kubernetes-job job
// agent and the kubernetes agent runtime) share: reaching a cluster
// through client-go from a kubeconfig held behind a secret reference (or
// the in-cluster config), decoding a pod template strictly, naming objects
// and reading why a pod failed.
//
// Invariants: a kubeconfig is resolved through ports.SecretResolver and
// never logged or kept beyond the clientset built from it; a refusal names
// the config field; a pod template with an unknown field is refused, not
// silently dropped.
package kube

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Label and annotation keys the adapters put on the objects they create.
const (
	// ManagedByLabel marks every object as created by reconciler.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedBy is ManagedByLabel's value.
	ManagedBy = "reconciler"
)

// Cluster says how to reach a cluster: the kubeconfig behind a secret
// reference (env:NAME or file:/path, its value the kubeconfig's YAML) and
// one of its contexts (empty: the current one), or, when KubeconfigRef is
// empty, the in-cluster config of the pod reconciler runs in.
type Cluster struct {
	KubeconfigRef string
	Context       string
}

// Connector builds one clientset per cluster and keeps it; goroutine-safe.
// The zero value is not usable: set Secrets (nil is allowed only for
// in-cluster access).
type Connector struct {
	// Secrets resolves KubeconfigRef.
	Secrets ports.SecretResolver
	// Field names the config map whose keys a refusal names
	// ("job_agent_config"); Cluster's fields are its kubeconfigRef and
	// context keys.
	Field string

	mu      sync.Mutex
	clients map[[32]byte]kubernetes.Interface
}

// Client returns the clientset of c. The kubeconfig is resolved on every
// call (a rotated secret gets a new clientset) and identified by its hash,
// never kept. A refusal wraps release.ErrInvalid and names the field.
func (k *Connector) Client(ctx context.Context, c Cluster) (kubernetes.Interface, error) {
	var (
		cfg *rest.Config
		err error
		id  [32]byte
	)
	if c.KubeconfigRef == "" {
		id = sha256.Sum256([]byte("in-cluster"))
	} else {
		raw, rerr := configmap.Resolve(ports.SelfAddressedSecret(ctx), k.Secrets, release.Field(k.Field, "kubeconfigRef"), c.KubeconfigRef)
		if rerr != nil {
			return nil, rerr
		}
		id = sha256.Sum256([]byte(raw + "\x00" + c.Context))
	}
	k.mu.Lock()
	cs, ok := k.clients[id]
	k.mu.Unlock()
	if ok {
		return cs, nil
	}
	if c.KubeconfigRef == "" {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, release.Invalid(release.Field(k.Field, "kubeconfigRef"), "not set, and not running in a cluster: "+err.Error())
		}
	} else {
		raw, rerr := configmap.Resolve(ports.SelfAddressedSecret(ctx), k.Secrets, release.Field(k.Field, "kubeconfigRef"), c.KubeconfigRef)
		if rerr != nil {
			return nil, rerr
		}
		cfg, err = restConfig([]byte(raw), c.Context)
		if err != nil {
			field := "kubeconfigRef"
			if strings.Contains(err.Error(), "context") && c.Context != "" {
				field = "context"
			}
			return nil, release.Invalid(release.Field(k.Field, field), err.Error())
		}
	}
	cs, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, release.Invalid(release.Field(k.Field, "kubeconfigRef"), "cannot build a client: "+err.Error())
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.clients == nil {
		k.clients = map[[32]byte]kubernetes.Interface{}
	}
	if prev, ok := k.clients[id]; ok {
		return prev, nil
	}
	k.clients[id] = cs
	return cs, nil
}

// restConfig builds a client config from a kubeconfig's content and a
// context name (empty: its current context). The error never quotes the
// kubeconfig.
func restConfig(kubeconfig []byte, context string) (*rest.Config, error) {
	api, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("not a kubeconfig: %w", err)
	}
	if context != "" {
		if _, ok := api.Contexts[context]; !ok {
			return nil, fmt.Errorf("the kubeconfig has no context %q", context)
		}
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*api, context, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

// dnsLabel is an RFC 1123 label: a namespace, a container name.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// IsDNSLabel reports whether s may name a namespace or a Job.
func IsDNSLabel(s string) bool { return dnsLabel.MatchString(s) }

// labelKey and labelValue are what Kubernetes accepts as a label's key
// (an optional DNS-subdomain prefix and a name) and value.
var (
	labelName  = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$`)
	labelValue = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$`)
	prefixName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
)

// CheckLabels checks labels (values too) or, with values false,
// annotation keys; the refusal names r's field key.KEY.
func CheckLabels(r *configmap.Reader, key string, m map[string]string, values bool) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		prefix, name, ok := strings.Cut(k, "/")
		if !ok {
			prefix, name = "", k
		}
		if (ok && !prefixName.MatchString(prefix)) || !labelName.MatchString(name) {
			r.Fail(key+"."+k, "not a Kubernetes label or annotation key")
			return
		}
		if values && !labelValue.MatchString(m[k]) {
			r.Fail(key+"."+k, fmt.Sprintf("not a Kubernetes label value: %q", m[k]))
			return
		}
	}
}

// PodTemplate reads r's optional key as a pod template (the
// PodTemplateSpec of a Job or the spec of a Pod: metadata and spec),
// strictly: an unknown field is refused naming it.
func PodTemplate(r *configmap.Reader, key string) corev1.PodTemplateSpec {
	var tpl corev1.PodTemplateSpec
	v, ok := r.Map[key]
	if !ok || v == nil || r.Err != nil {
		return tpl
	}
	if _, isMap := v.(map[string]any); !isMap {
		r.Fail(key, "want an object: a pod template with metadata and spec")
		return tpl
	}
	raw, err := json.Marshal(v)
	if err != nil {
		r.Fail(key, "not JSON: "+err.Error())
		return tpl
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tpl); err != nil {
		r.Fail(key, "not a pod template: "+err.Error())
		return corev1.PodTemplateSpec{}
	}
	return tpl
}

// SetEnv sets env vars on c, replacing a variable of the same name; names
// are set in sorted order after the ones c already has.
func SetEnv(c *corev1.Container, env map[string]string) {
	for _, name := range slices.Sorted(maps.Keys(env)) {
		replaced := false
		for i := range c.Env {
			if c.Env[i].Name == name {
				c.Env[i] = corev1.EnvVar{Name: name, Value: env[name]}
				replaced = true
			}
		}
		if !replaced {
			c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: env[name]})
		}
	}
}

// Merge returns base with over's entries added (over wins); nil when both
// are empty.
func Merge(base, over map[string]string) map[string]string {
	if len(base)+len(over) == 0 {
		return nil
	}
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// PodReason says why a pod failed or is stuck, for a job's or a run's
// message: the pod's own reason (Evicted, DeadlineExceeded), else its
// first container that terminated with an error (OOMKilled, exit code
// 137) or is waiting (ImagePullBackOff); "" when it says nothing.
func PodReason(p *corev1.Pod) string {
	if p.Status.Reason != "" {
		return strings.TrimSpace(p.Status.Reason + ": " + p.Status.Message)
	}
	statuses := append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			s := fmt.Sprintf("container %s %s (exit code %d)", cs.Name, t.Reason, t.ExitCode)
			if t.Message != "" {
				s += ": " + t.Message
			}
			return s
		}
	}
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return strings.TrimSpace(fmt.Sprintf("container %s %s %s", cs.Name, w.Reason, w.Message))
		}
	}
	return ""
}

// envName is what a container's environment variable name may be.
var envName = regexp.MustCompile(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`)

// IsEnvName reports whether s may name a container's environment variable.
func IsEnvName(s string) bool { return envName.MatchString(s) }

// CheckPodSecurity refuses, through r (fields under key, e.g.
// "template.spec.hostNetwork"), what lets a pod out of its container onto
// the node: hostNetwork, hostPID, hostIPC, a hostPath volume, and in any
// container (init and ephemeral too) privileged, allowPrivilegeEscalation,
// added capabilities or a Windows host process. A pod spec whoever may
// write a job agent's config controls must not reach the node's
// credentials or the other pods on it.
func CheckPodSecurity(r *configmap.Reader, key string, spec *corev1.PodSpec) {
	why := "is refused: it would give the pod the node's"
	host := map[string]bool{"hostNetwork": spec.HostNetwork, "hostPID": spec.HostPID, "hostIPC": spec.HostIPC}
	for _, k := range []string{"hostNetwork", "hostPID", "hostIPC"} {
		if host[k] {
			r.Fail(key+"."+k, why+" "+strings.TrimPrefix(k, "host")+" namespace")
		}
	}
	for i, v := range spec.Volumes {
		if v.HostPath != nil {
			r.Fail(fmt.Sprintf("%s.volumes[%d].hostPath", key, i), why+" files (a hostPath volume)")
		}
	}
	if sc := spec.SecurityContext; sc != nil && sc.WindowsOptions != nil && isTrue(sc.WindowsOptions.HostProcess) {
		r.Fail(key+".securityContext.windowsOptions.hostProcess", why+" processes (a Windows host process)")
	}
	check := func(field string, sc *corev1.SecurityContext) {
		if sc == nil {
			return
		}
		switch {
		case isTrue(sc.Privileged):
			r.Fail(field+".privileged", "is refused: a privileged container has the node's devices and capabilities")
		case isTrue(sc.AllowPrivilegeEscalation):
			r.Fail(field+".allowPrivilegeEscalation", "is refused: a process could gain more privileges than its parent")
		case sc.Capabilities != nil && len(sc.Capabilities.Add) > 0:
			r.Fail(field+".capabilities.add", fmt.Sprintf("is refused: no capability may be added (%v)", sc.Capabilities.Add))
		case sc.WindowsOptions != nil && isTrue(sc.WindowsOptions.HostProcess):
			r.Fail(field+".windowsOptions.hostProcess", why+" processes (a Windows host process)")
		}
	}
	for i := range spec.InitContainers {
		check(fmt.Sprintf("%s.initContainers[%d].securityContext", key, i), spec.InitContainers[i].SecurityContext)
	}
	for i := range spec.Containers {
		check(fmt.Sprintf("%s.containers[%d].securityContext", key, i), spec.Containers[i].SecurityContext)
	}
	for i := range spec.EphemeralContainers {
		check(fmt.Sprintf("%s.ephemeralContainers[%d].securityContext", key, i), spec.EphemeralContainers[i].SecurityContext)
	}
}

func isTrue(b *bool) bool { return b != nil && *b }
