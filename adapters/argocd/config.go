package argocd

import (
	"regexp"

	"github.com/reconcilerhq/reconciler/internal/configmap"
)

// config is one job's validated configuration.
type config struct {
	server       string
	application  string
	appNamespace string
	project      string
	revision     string
	parameters   map[string]string
	namespace    string
	// sourcePosition is the 1-based source of a multi-source Application
	// the revision and parameters go to (0: every non-ref source).
	sourcePosition int
	prune          bool
	tokenRef       string
}

// appName is the shape of a Kubernetes object name.
var appName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// ValidateConfig checks an argo-cd job_agent_config (the agent's config
// merged with the deployment's, version's or task's); a refusal is a
// *release.FieldError naming job_agent_config.<key>. Keys:
//
//	server        Argo CD's URL, e.g. https://argocd.example.com (required)
//	application   the Application's name (required)
//	appNamespace  the Application's namespace, when not Argo CD's own
//	project       the Application's project, when the server wants it
//	revision      the target revision (git ref or chart version) to set
//	parameters    Helm parameters to set, an object of scalars
//	namespace     the destination namespace to set
//	sourcePosition  of a multi-source Application, the 1-based position of
//	              the source to set revision and parameters on (default:
//	              every source that is not only a values "ref")
//	prune         prune resources no longer in git (default false)
//	tokenRef      secret reference of an API token (required)
func ValidateConfig(cfg map[string]any) error {
	_, err := parseConfig(cfg)
	return err
}

func parseConfig(cfg map[string]any) (config, error) {
	r := &configmap.Reader{Prefix: "job_agent_config", Map: cfg}
	c := config{
		server:         r.URL("server", ""),
		application:    r.Required("application"),
		appNamespace:   r.String("appNamespace", ""),
		project:        r.String("project", ""),
		revision:       r.String("revision", ""),
		parameters:     r.Strings("parameters"),
		namespace:      r.String("namespace", ""),
		sourcePosition: r.Int("sourcePosition", 0, 0, 1000),
		prune:          r.Bool("prune", false),
		tokenRef:       r.SecretRef("tokenRef", ""),
	}
	if c.application != "" && !appName.MatchString(c.application) {
		r.Fail("application", "want a Kubernetes object name (lower-case letters, digits, '-' and '.'), got "+quote(c.application))
	}
	if c.appNamespace != "" && !appName.MatchString(c.appNamespace) {
		r.Fail("appNamespace", "want a Kubernetes namespace name, got "+quote(c.appNamespace))
	}
	if c.namespace != "" && !appName.MatchString(c.namespace) {
		r.Fail("namespace", "want a Kubernetes namespace name, got "+quote(c.namespace))
	}
	return c, r.Err
}

func quote(s string) string { return `"` + s + `"` }
