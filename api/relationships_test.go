package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/apply"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// relationshipDocs relate cluster r1 to VPC vpc-1 by rule cluster-vpc, and
// give deployment web (on clusters only) a variable of each outcome: one
// resolved through the relation, one naming a relation no rule has.
func relationshipDocs() []any {
	doc := func(kind, name, parentKey, parent string, spec map[string]any) map[string]any {
		return map[string]any{"apiVersion": apply.APIVersion, "kind": kind, "metadata": map[string]any{"name": name, parentKey: parent}, "spec": spec}
	}
	ref := func(relation string, path ...string) map[string]any {
		return map[string]any{"reference": map[string]any{"relation": relation, "path": path}}
	}
	return []any{
		doc("Resource", "vpc-1", "workspace", "ws", map[string]any{"kind": "VPC", "identifier": "aws/vpc-1", "name": "vpc-1",
			"metadata": map[string]any{"region": "eu-west-1"}}),
		doc("Resource", "r1", "workspace", "ws", map[string]any{"kind": "cluster", "identifier": "k8s/r1", "name": "r1",
			"metadata": map[string]any{"vpc": "vpc-1"}}),
		doc("RelationshipRule", "cluster-vpc", "workspace", "ws", map[string]any{"name": "vpc",
			"from_selector": `resource.kind == "cluster"`, "match": `from.metadata.vpc == to.id && to.kind == "VPC"`}),
		doc("Deployment", "web", "system", "sys", map[string]any{"name": "web", "slug": "web", "job_agent_id": "ext",
			"resource_selector": `resource.kind == "cluster"`,
			"variables": []any{
				map[string]any{"key": "region", "default": ref("vpc", "metadata", "region")},
				map[string]any{"key": "vpc-id", "default": ref("vpc", "id")},
				map[string]any{"key": "db", "default": ref("database", "id")},
				map[string]any{"key": "replicas", "default": map[string]any{"literal": 2}},
			}}),
	}
}

// TestRelationshipsEndToEnd: apply a relationship rule and a deployment
// with reference variables, create a version, and the job a pull agent
// takes carries the related resource's fields; a reference with no related
// resource is left out, and explain shows both.
func TestRelationshipsEndToEnd(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		res := f.do(http.MethodPost, "/api/v1/apply", "write", map[string]any{"documents": relationshipDocs()})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		res = f.do(http.MethodGet, "/api/v1/relationship-rules/cluster-vpc", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Equal(t, "vpc", res.json(t)["name"])

		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
		id := f.activeJob("web:dev:r1")
		res = f.do(http.MethodPost, takePath("ext", "0s"), "agent", map[string]any{"taker": "host-1"})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		var tk struct {
			Job     struct{ ID string }                `json:"job"`
			Release struct{ Variables map[string]any } `json:"release"`
		}
		require.NoError(t, json.Unmarshal(res.body, &tk))
		require.Equal(t, id, tk.Job.ID)
		require.Equal(t, map[string]any{
			"region":   map[string]any{"literal": "eu-west-1"},
			"vpc-id":   map[string]any{"literal": "vpc-1"},
			"replicas": map[string]any{"literal": float64(2)},
		}, tk.Release.Variables, "references resolve to the related resource's fields; db has no related resource")

		res = f.do(http.MethodGet, "/api/v1/targets/web:dev:r1/explain", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		var ex chain.Explanation
		require.NoError(t, json.Unmarshal(res.body, &ex))
		require.Equal(t, []release.Relation{
			{Variable: "db", Reference: "database", Path: []string{"id"}, Unresolved: `no resource is related to r1 as "database"`},
			{Variable: "region", Reference: "vpc", Path: []string{"metadata", "region"}, Rule: "cluster-vpc", ResourceID: "vpc-1"},
			{Variable: "vpc-id", Reference: "vpc", Path: []string{"id"}, Rule: "cluster-vpc", ResourceID: "vpc-1"},
		}, ex.Relations)

		// The related resource changes: the target gets a new release.
		docs := relationshipDocs()
		docs[0].(map[string]any)["spec"].(map[string]any)["metadata"] = map[string]any{"region": "us-east-1"}
		res = f.do(http.MethodPost, "/api/v1/apply", "write", map[string]any{"documents": docs[:1]})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		f.drain()
		rel := f.do(http.MethodGet, "/api/v1/targets/web:dev:r1", "read", nil).json(t)
		desired, _ := rel["desired"].(map[string]any)
		require.NotNil(t, desired, "%v", rel)
		r, err := f.st.releases.ReleaseGet(f.ctx, desired["release_id"].(string))
		require.NoError(t, err)
		require.Equal(t, release.Value{Literal: "us-east-1"}, r.Variables["region"], "a change of the related resource re-resolves the target")
	})
}

// TestRelationshipRulesBadInput: a bad rule is a 422 naming the field, by
// PUT and by apply, and changes nothing; writes need scope write.
func TestRelationshipRulesBadInput(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		good := map[string]any{"id": "r", "workspace_id": "ws", "name": "vpc", "match": "from.metadata.vpc == to.id"}
		for _, tt := range []struct {
			name, field string
			value       any
			location    string
		}{
			{"match does not compile", "match", "from.id ==", "body.match"},
			{"match names an unknown variable", "match", `resource.id == "x"`, "body.match"},
			{"match required", "match", "", "body.match"},
			{"name grammar", "name", "the vpc", "body.name"},
			{"to selector", "to_selector", "resource.kind ==", "body.to_selector"},
			{"unknown field", "colour", "red", "body.colour"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				body := map[string]any{}
				for k, v := range good {
					body[k] = v
				}
				body[tt.field] = tt.value
				p := f.do(http.MethodPut, "/api/v1/relationship-rules/r", "write", body).problem(t, http.StatusUnprocessableEntity)
				require.Contains(t, locations(p), tt.location, "%v", p)
			})
		}
		f.do(http.MethodGet, "/api/v1/relationship-rules/r", "read", nil).problem(t, http.StatusNotFound)
		f.do(http.MethodPut, "/api/v1/relationship-rules/r", "read", good).problem(t, http.StatusForbidden)
		f.do(http.MethodPut, "/api/v1/relationship-rules/r", "write", map[string]any{"id": "r", "workspace_id": "nope", "name": "vpc", "match": "true"}).problem(t, http.StatusNotFound)

		bad := relationshipDocs()[2].(map[string]any)
		bad["spec"].(map[string]any)["match"] = "from.id =="
		p := f.do(http.MethodPost, "/api/v1/apply", "write", map[string]any{"documents": []any{bad}}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.documents[0].spec.match")
		f.do(http.MethodGet, "/api/v1/relationship-rules/cluster-vpc", "read", nil).problem(t, http.StatusNotFound)

		res := f.do(http.MethodPut, "/api/v1/relationship-rules/r", "write", good)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Equal(t, http.StatusNoContent, f.do(http.MethodDelete, "/api/v1/relationship-rules/r", "write", nil, "If-Match", `"1"`).status)
	})
}
