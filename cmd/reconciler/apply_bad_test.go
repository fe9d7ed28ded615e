package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
)

// TestApplyRefusesBadObjects runs the bad documents of issue 29 through
// `reconciler apply` on an in-process server over memory (serve's agent
// config validator): each exits 2 saying what the API's PUT says
// (api.TestBadObjectsRefusedAlike), and nothing is created.
func TestApplyRefusesBadObjects(t *testing.T) {
	t.Parallel()
	url, tok := apiServer(t)
	for _, tc := range []struct{ name, kind, meta, spec, want string }{
		{"id outside the grammar", "JobAgent", `{"name":"ä"}`, `{"name":"x","type":"api"}`, "is not a valid id"},
		{"missing job agent", "Deployment", `{"name":"api2","system":"shop"}`, `{"name":"api2","slug":"api2","job_agent_id":"nosuch","resource_selector":"true"}`, `"nosuch" does not exist`},
		{"unknown agent type", "JobAgent", `{"name":"j"}`, `{"name":"j","type":"nosuch-type"}`, `unknown job agent type "nosuch-type"`},
		{"pull lease forever", "JobAgent", `{"name":"j"}`, `{"name":"j","type":"pull","config":{"lease":"forever"}}`, "lease"},
		{"bidi override in a name", "JobAgent", `{"name":"j"}`, `{"name":"e9\u202egnp.exe","type":"api"}`, "U+202E"},
		{"duplicate key", "JobAgent", `{"name":"j"}`, `{"name":"a","name":"b","type":"api"}`, `"name" already defined`}, // the CLI reads YAML, which refuses it first
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := fmt.Sprintf(`{"apiVersion":"reconciler.dev/v1","kind":%q,"metadata":%s,"spec":%s}`, tc.kind, tc.meta, tc.spec)
			r := runCLI(t, doc, "apply", "-f", "-", "--server", url, "--token", tok[ports.ScopeAdmin])
			require.Equal(t, 2, r.code, "%s %v", r.stderr, r.err)
			msg := r.stderr
			if r.err != nil {
				msg += r.err.Error()
			}
			require.Contains(t, msg, tc.want)
			require.NotContains(t, r.stdout, "created")
		})
	}
}
