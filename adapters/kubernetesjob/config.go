package kubernetesjob

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/kube"
	"github.com/reconcilerhq/reconciler/reconcile/release"

	corev1 "k8s.io/api/core/v1"
)

// config is a parsed job_agent_config.
type config struct {
	cluster            kube.Cluster
	namespace, image   string
	command, args      []string
	env                map[string]string
	labels             map[string]string
	annotations        map[string]string
	serviceAccountName string
	backoffLimit       int32
	activeDeadline     time.Duration
	ttlAfterFinished   time.Duration
	ttlSet             bool
	template           corev1.PodTemplateSpec
}

// ValidateConfig checks a kubernetes-job job_agent_config; a refusal is a
// *release.FieldError naming job_agent_config.<key>. Keys:
//
//	namespace           the namespace the Job is created in (required)
//	image               the container's image (required unless template has one)
//	command, args       the container's command and arguments, lists of strings
//	env                 environment variables, an object of scalars
//	labels, annotations added to the Job and its pods, objects of strings
//	serviceAccountName  the pods' service account
//	backoffLimit        retries of a failed pod before the Job fails (default 0)
//	activeDeadline      the Job's deadline, a duration ("30m")
//	ttlAfterFinished    delete the Job this long after it ended ("1h")
//	template            a pod template (metadata, spec) the Job's pods start from
//	kubeconfigRef       secret reference of a kubeconfig (default: in-cluster)
//	context             the kubeconfig's context (default: its current one)
func ValidateConfig(cfg map[string]any) error {
	_, err := parseConfig(cfg)
	return err
}

func parseConfig(cfg map[string]any) (config, error) {
	r := &configmap.Reader{Prefix: "job_agent_config", Map: cfg}
	c := config{
		namespace:          r.Required("namespace"),
		image:              r.String("image", ""),
		command:            r.List("command"),
		args:               r.List("args"),
		env:                r.Strings("env"),
		labels:             r.Strings("labels"),
		annotations:        r.Strings("annotations"),
		serviceAccountName: r.String("serviceAccountName", ""),
		backoffLimit:       int32(r.Int("backoffLimit", 0, 0, 100)),
		activeDeadline:     r.Duration("activeDeadline", 0),
		ttlAfterFinished:   r.Duration("ttlAfterFinished", 0),
		template:           kube.PodTemplate(r, "template"),
	}
	_, c.ttlSet = cfg["ttlAfterFinished"]
	c.ttlSet = c.ttlSet && cfg["ttlAfterFinished"] != nil
	c.cluster = readCluster(r)
	if c.namespace != "" && !kube.IsDNSLabel(c.namespace) {
		r.Fail("namespace", fmt.Sprintf("want a Kubernetes namespace name, got %q", c.namespace))
	}
	if c.serviceAccountName != "" && !kube.IsDNSLabel(c.serviceAccountName) {
		r.Fail("serviceAccountName", fmt.Sprintf("want a Kubernetes name, got %q", c.serviceAccountName))
	}
	for _, name := range slices.Sorted(maps.Keys(c.env)) {
		if !kube.IsEnvName(name) {
			r.Fail("env."+name, "not an environment variable name")
		}
	}
	kube.CheckLabels(r, "labels", c.labels, true)
	kube.CheckLabels(r, "annotations", c.annotations, false)
	if r.Err == nil && c.image == "" && (len(c.template.Spec.Containers) == 0 || c.template.Spec.Containers[0].Image == "") {
		r.Fail("image", "is required (or a template whose first container has an image)")
	}
	if c.activeDeadline > 0 && c.activeDeadline < time.Second {
		r.Fail("activeDeadline", "want at least 1s")
	}
	for key, d := range map[string]time.Duration{"activeDeadline": c.activeDeadline, "ttlAfterFinished": c.ttlAfterFinished} {
		if d > time.Duration(math.MaxInt32)*time.Second {
			r.Fail(key, "want at most 68 years")
		}
	}
	if rp := c.template.Spec.RestartPolicy; rp != "" && rp != corev1.RestartPolicyNever && rp != corev1.RestartPolicyOnFailure {
		r.Fail("template.spec.restartPolicy", "a Job's pods restart Never or OnFailure, not "+string(rp))
	}
	kube.CheckPodSecurity(r, "template.spec", &c.template.Spec)
	return c, r.Err
}

// Limits are the namespaces and service accounts the operator lets
// kubernetes-job Jobs use (serve --kubernetes-namespace,
// --kubernetes-service-account): whoever may write a job agent's config
// must not run a pod in kube-system or as a powerful service account.
type Limits struct {
	// Namespaces the Jobs may be created in; none: DefaultNamespace only.
	Namespaces []string
	// ServiceAccounts the pods may run as; none: "default" only. A pod
	// that names none runs as "default".
	ServiceAccounts []string
}

// serviceAccountNamespaceFile holds, in a pod, the pod's namespace.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// DefaultNamespace is the namespace serve runs in (its pod's service
// account namespace file), else "default".
func DefaultNamespace() string {
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(b)); kube.IsDNSLabel(ns) {
			return ns
		}
	}
	return "default"
}

// namespaces and serviceAccounts are l's lists, the defaults filled in.
func (l Limits) namespaces() []string {
	if len(l.Namespaces) == 0 {
		return []string{DefaultNamespace()}
	}
	return l.Namespaces
}

func (l Limits) serviceAccounts() []string {
	if len(l.ServiceAccounts) == 0 {
		return []string{"default"}
	}
	return l.ServiceAccounts
}

// Check refuses a config whose Job would run outside l: its namespace,
// or the service account of serviceAccountName, template.spec's
// serviceAccountName or serviceAccount ("default" when none is named). The
// refusal names job_agent_config.<key> and the serve flag that allows it.
func (l Limits) Check(cfg map[string]any) error {
	c, err := parseConfig(cfg)
	if err != nil {
		return err
	}
	return l.check(c)
}

func (l Limits) check(c config) error {
	if ns := l.namespaces(); !slices.Contains(ns, c.namespace) {
		return release.Invalid("job_agent_config.namespace", fmt.Sprintf("%q is not a namespace Jobs may be created in (%s); serve --kubernetes-namespace %s allows it",
			c.namespace, strings.Join(ns, ", "), c.namespace))
	}
	sa := map[string]string{"serviceAccountName": c.serviceAccountName,
		"template.spec.serviceAccountName": c.template.Spec.ServiceAccountName, "template.spec.serviceAccount": c.template.Spec.DeprecatedServiceAccount}
	named := false
	for _, key := range []string{"serviceAccountName", "template.spec.serviceAccountName", "template.spec.serviceAccount"} {
		if sa[key] == "" {
			continue
		}
		named = true
		if err := l.checkAccount("job_agent_config."+key, sa[key]); err != nil {
			return err
		}
	}
	if !named {
		return l.checkAccount("job_agent_config.serviceAccountName", "default")
	}
	return nil
}

func (l Limits) checkAccount(field, name string) error {
	if accounts := l.serviceAccounts(); !slices.Contains(accounts, name) {
		return release.Invalid(field, fmt.Sprintf("service account %q is not one the Jobs' pods may run as (%s); serve --kubernetes-service-account %s allows it",
			name, strings.Join(accounts, ", "), name))
	}
	return nil
}

// variableEnv turns the release's variables into environment variables:
// literals only (a string as it is, anything else as JSON), by their key
// when it is a variable name. Sensitive variables are left out: their
// resolved value would be stored in the Job's spec; give the pods a
// Kubernetes Secret through the template instead. References are left
// out too.
func variableEnv(vars map[string]release.Value) map[string]string {
	out := map[string]string{}
	for k, v := range vars {
		if v.Kind() != release.ValueLiteral || !kube.IsEnvName(k) {
			continue
		}
		switch x := v.Literal.(type) {
		case nil:
			out[k] = ""
		case string:
			out[k] = x
		case float64:
			out[k] = strconv.FormatFloat(x, 'f', -1, 64)
		default:
			b, err := json.Marshal(x)
			if err != nil {
				continue
			}
			out[k] = string(b)
		}
	}
	return out
}

// parseClusterOnly reads the cluster keys (kubeconfigRef, context) of an
// agent record's config.
func parseClusterOnly(cfg map[string]any) (config, error) {
	r := &configmap.Reader{Prefix: "job_agent_config", Map: cfg}
	return config{cluster: readCluster(r)}, r.Err
}

// readCluster reads kubeconfigRef (optional: absent is the in-cluster
// config) and context.
func readCluster(r *configmap.Reader) kube.Cluster {
	var c kube.Cluster
	if v, ok := r.Map["kubeconfigRef"]; ok && v != nil {
		c.KubeconfigRef = r.SecretRef("kubeconfigRef", "")
	}
	c.Context = r.String("context", "")
	return c
}
