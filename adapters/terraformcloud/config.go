package terraformcloud

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"

	"github.com/reconcilerhq/reconciler/internal/configmap"
)

// DefaultAddress is the API host of HCP Terraform.
const DefaultAddress = "https://app.terraform.io"

var (
	workspaceID = regexp.MustCompile(`^ws-[A-Za-z0-9]+$`)
	runID       = regexp.MustCompile(`^run-[A-Za-z0-9]+$`)
)

// config is one job's validated configuration.
type config struct {
	address       string
	workspaceID   string
	organization  string
	workspaceName string
	message       string
	variables     []variable
	autoApply     *bool
	tokenRef      string
}

// variable is a run variable; Value is HCL (strings quoted).
type variable struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// ValidateConfig checks a terraform-cloud job_agent_config; a refusal is a
// *release.FieldError naming job_agent_config.<key>. Keys:
//
//	workspaceId    the workspace ("ws-..."), required
//	variables      run variables, an object of strings, numbers, booleans
//	message        the run's message (the correlation key is appended)
//	autoApply      apply a successful plan without confirmation
//	               (default: the workspace's setting)
//	organization, workspaceName   when both are set, reports link the run
//	tokenRef       secret reference of an API token (required)
//	address        the API host (default https://app.terraform.io)
func ValidateConfig(cfg map[string]any) error {
	_, err := parseConfig(cfg)
	return err
}

func parseConfig(cfg map[string]any) (config, error) {
	r := &configmap.Reader{Prefix: "job_agent_config", Map: cfg}
	c := config{
		address:       r.URL("address", DefaultAddress),
		workspaceID:   r.Required("workspaceId"),
		organization:  r.String("organization", ""),
		workspaceName: r.String("workspaceName", ""),
		message:       r.String("message", "Triggered by reconciler"),
		tokenRef:      r.SecretRef("tokenRef", ""),
	}
	if _, ok := cfg["autoApply"]; ok {
		b := r.Bool("autoApply", false)
		c.autoApply = &b
	}
	if c.workspaceID != "" && !workspaceID.MatchString(c.workspaceID) {
		r.Fail("workspaceId", fmt.Sprintf("want a workspace id such as \"ws-2Qhk7LHgbMrm3grF\", got %q", c.workspaceID))
	}
	if raw, ok := cfg["variables"].(map[string]any); ok {
		keys := make([]string, 0, len(raw))
		for k := range raw {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch v := raw[k].(type) {
			case string:
				b, _ := json.Marshal(v) // an HCL string literal is a JSON string literal for these values
				c.variables = append(c.variables, variable{Key: k, Value: string(b)})
			case bool, float64:
				b, _ := json.Marshal(v)
				c.variables = append(c.variables, variable{Key: k, Value: string(b)})
			default:
				r.Fail("variables."+k, "want a string, number or boolean")
			}
		}
	} else if v, ok := cfg["variables"]; ok && v != nil {
		r.Fail("variables", "want an object of strings, numbers or booleans")
	}
	return c, r.Err
}
