package release

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// relWorld is a workspace of a cluster in vpc-b, two VPCs, a database and
// a resource of another workspace.
func relWorld() (from Resource, cands []Resource) {
	from = Resource{ID: "cluster-1", WorkspaceID: "ws", Kind: "Cluster", Metadata: map[string]string{"vpc": "vpc-b", "team": "core"}}
	cands = []Resource{
		from,
		{ID: "vpc-a", WorkspaceID: "ws", Kind: "VPC", Metadata: map[string]string{"region": "eu-west-1"}},
		{ID: "vpc-b", WorkspaceID: "ws", Kind: "VPC", Metadata: map[string]string{"region": "us-east-1"},
			Config: map[string]any{"cidr": "10.0.0.0/16", "subnets": map[string]any{"count": int64(3)}}},
		{ID: "db-1", WorkspaceID: "ws", Kind: "Database", Metadata: map[string]string{"team": "core"}},
		{ID: "vpc-b", WorkspaceID: "other", Kind: "VPC"},
	}
	return from, cands
}

// TestRelated is the table of the matcher's documented rules.
func TestRelated(t *testing.T) {
	t.Parallel()
	vpc := RelationshipRule{ID: "r-vpc", WorkspaceID: "ws", Name: "vpc", Match: `from.metadata.vpc == to.id && to.kind == "VPC"`}
	tests := []struct {
		name     string
		relation string
		rules    []RelationshipRule
		wantRule string
		wantTo   string
	}{
		{"match by metadata", "vpc", []RelationshipRule{vpc}, "r-vpc", "vpc-b"},
		{"another relation name does not apply", "database", []RelationshipRule{vpc}, "", ""},
		{"no rules", "vpc", nil, "", ""},
		{"several matches: smallest id", "any-vpc", []RelationshipRule{
			{ID: "r", WorkspaceID: "ws", Name: "any-vpc", Match: `to.kind == "VPC"`}}, "r", "vpc-a"},
		{"never the resource itself", "self", []RelationshipRule{
			{ID: "r", WorkspaceID: "ws", Name: "self", Match: `to.kind == "Cluster"`}}, "", ""},
		{"to selector narrows", "db", []RelationshipRule{
			{ID: "r", WorkspaceID: "ws", Name: "db", ToSelector: `resource.kind == "Database"`, Match: `from.metadata.team == to.metadata.team`}}, "r", "db-1"},
		{"from selector that does not hold", "vpc", []RelationshipRule{
			{ID: "r", WorkspaceID: "ws", Name: "vpc", FromSelector: `resource.kind == "Function"`, Match: vpc.Match}}, "", ""},
		{"a match that fails to evaluate does not match", "vpc", []RelationshipRule{
			{ID: "r", WorkspaceID: "ws", Name: "vpc", Match: `from.metadata.missing == to.id`}}, "", ""},
		{"a rule of another workspace does not apply", "vpc", []RelationshipRule{
			{ID: "r", WorkspaceID: "other", Name: "vpc", Match: `true`}}, "", ""},
		{"first rule by id that relates wins", "vpc", []RelationshipRule{
			{ID: "z", WorkspaceID: "ws", Name: "vpc", Match: `to.id == "vpc-a"`},
			{ID: "b", WorkspaceID: "ws", Name: "vpc", Match: `to.id == "nothing"`},
			{ID: "a", WorkspaceID: "ws", Name: "vpc", Match: vpc.Match}}, "a", "vpc-b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			from, cands := relWorld()
			r, to, ok := Related(tt.relation, &from, tt.rules, cands)
			if tt.wantTo == "" {
				require.False(t, ok)
				return
			}
			require.True(t, ok)
			require.Equal(t, tt.wantRule, r.ID)
			require.Equal(t, tt.wantTo, to.ID)
			require.Equal(t, "ws", to.WorkspaceID)
		})
	}
}

// TestResolveReferences: a reference resolves to the related resource's
// field, else is left out with the reason; other values pass unchanged.
func TestResolveReferences(t *testing.T) {
	t.Parallel()
	from, cands := relWorld()
	rules := []RelationshipRule{{ID: "r-vpc", WorkspaceID: "ws", Name: "vpc", Match: `from.metadata.vpc == to.id`}}
	ref := func(rel string, path ...string) Value { return Value{Reference: &Reference{Relation: rel, Path: path}} }
	vals := map[string]Value{
		"region":  ref("vpc", "metadata", "region"),
		"subnets": ref("vpc", "config", "subnets"),
		"vpc-id":  ref("vpc", "id"),
		"missing": ref("vpc", "metadata", "nothing"),
		"db":      ref("database", "id"),
		"plain":   {Literal: "x"},
	}
	got, rels := ResolveReferences(vals, &from, rules, cands)
	require.Equal(t, map[string]Value{
		"region":  {Literal: "us-east-1"},
		"subnets": {Literal: map[string]any{"count": int64(3)}},
		"vpc-id":  {Literal: "vpc-b"},
		"plain":   {Literal: "x"},
	}, got)
	require.Equal(t, []Relation{
		{Variable: "db", Reference: "database", Path: []string{"id"}, Unresolved: `no resource is related to cluster-1 as "database"`},
		{Variable: "missing", Reference: "vpc", Path: []string{"metadata", "nothing"}, Rule: "r-vpc", ResourceID: "vpc-b", Unresolved: `resource vpc-b has no field "metadata.nothing"`},
		{Variable: "region", Reference: "vpc", Path: []string{"metadata", "region"}, Rule: "r-vpc", ResourceID: "vpc-b"},
		{Variable: "subnets", Reference: "vpc", Path: []string{"config", "subnets"}, Rule: "r-vpc", ResourceID: "vpc-b"},
		{Variable: "vpc-id", Reference: "vpc", Path: []string{"id"}, Rule: "r-vpc", ResourceID: "vpc-b"},
	}, rels)
	require.NotNil(t, vals["region"].Reference, "the input is not changed")
	got["subnets"].Literal.(map[string]any)["count"] = "changed"
	require.Equal(t, int64(3), cands[2].Config["subnets"].(map[string]any)["count"], "a literal shares nothing with the resource")

	same, rels := ResolveReferences(map[string]Value{"plain": {Literal: 1}}, &from, rules, cands)
	require.Equal(t, map[string]Value{"plain": {Literal: 1}}, same)
	require.Nil(t, rels)
}

// TestRelationshipRuleValidate names the bad field.
func TestRelationshipRuleValidate(t *testing.T) {
	t.Parallel()
	ok := RelationshipRule{ID: "cluster-vpc", WorkspaceID: "ws", Name: "vpc", Match: `from.metadata.vpc == to.id`}
	require.NoError(t, ok.Validate())
	tests := []struct {
		name  string
		edit  func(r *RelationshipRule)
		field string
	}{
		{"id grammar", func(r *RelationshipRule) { r.ID = "Not An Id" }, "id"},
		{"workspace required", func(r *RelationshipRule) { r.WorkspaceID = "" }, "workspace_id"},
		{"name required", func(r *RelationshipRule) { r.Name = "" }, "name"},
		{"name grammar", func(r *RelationshipRule) { r.Name = "the vpc" }, "name"},
		{"match required", func(r *RelationshipRule) { r.Match = "" }, "match"},
		{"match compiles", func(r *RelationshipRule) { r.Match = "from.id ==" }, "match"},
		{"match names only from and to", func(r *RelationshipRule) { r.Match = `resource.id == "x"` }, "match"},
		{"match is boolean", func(r *RelationshipRule) { r.Match = `"x" + string(to.id)` }, "match"},
		{"from selector compiles", func(r *RelationshipRule) { r.FromSelector = "resource.kind ==" }, "from_selector"},
		{"to selector compiles", func(r *RelationshipRule) { r.ToSelector = "to.kind == 1" }, "to_selector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := ok
			tt.edit(&r)
			err := r.Validate()
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "%v", err)
			require.Equal(t, tt.field, fe.Field)
			require.ErrorIs(t, err, ErrInvalid)
		})
	}
}

// TestResolveReferencesProperty: resolution is deterministic and
// independent of the order of the rules and of the candidates.
func TestResolveReferencesProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		vpcs := []string{"v0", "v1", "v2", "v3"}
		n := rapid.IntRange(0, 8).Draw(t, "resources")
		var cands []Resource
		for i := range n {
			cands = append(cands, Resource{
				ID: fmt.Sprintf("r%d", i), WorkspaceID: rapid.SampledFrom([]string{"ws", "ws", "other"}).Draw(t, "ws"),
				Kind:     rapid.SampledFrom([]string{"VPC", "Cluster"}).Draw(t, "kind"),
				Metadata: map[string]string{"vpc": rapid.SampledFrom(vpcs).Draw(t, "vpc"), "region": rapid.SampledFrom([]string{"eu", "us"}).Draw(t, "region")},
			})
		}
		from := Resource{ID: "from", WorkspaceID: "ws", Kind: "Cluster", Metadata: map[string]string{"vpc": rapid.SampledFrom(vpcs).Draw(t, "from-vpc")}}
		cands = append(cands, from)
		matches := []string{
			`from.metadata.vpc == to.metadata.vpc && to.kind == "VPC"`,
			`to.kind == "VPC"`,
			`to.metadata.region == "eu"`,
			`from.metadata.nothing == to.id`,
		}
		var rules []RelationshipRule
		for i := range rapid.IntRange(0, 4).Draw(t, "rules") {
			rules = append(rules, RelationshipRule{ID: fmt.Sprintf("rule%d", i), WorkspaceID: "ws",
				Name:  rapid.SampledFrom([]string{"vpc", "net"}).Draw(t, "name"),
				Match: rapid.SampledFrom(matches).Draw(t, "match")})
		}
		vals := map[string]Value{
			"a": {Reference: &Reference{Relation: "vpc", Path: []string{"metadata", "region"}}},
			"b": {Reference: &Reference{Relation: "net", Path: []string{"id"}}},
			"c": {Literal: "plain"},
		}
		want, wantRels := ResolveReferences(vals, &from, rules, cands)
		again, againRels := ResolveReferences(vals, &from, rules, cands)
		require.Equal(t, want, again, "deterministic")
		require.Equal(t, wantRels, againRels, "deterministic")

		shuffled := func(n int, label string) []int {
			idx := rapid.Permutation(slices.Collect(func(yield func(int) bool) {
				for i := range n {
					if !yield(i) {
						return
					}
				}
			})).Draw(t, label)
			return idx
		}
		pc, pr := shuffled(len(cands), "cand-order"), shuffled(len(rules), "rule-order")
		cands2 := make([]Resource, len(cands))
		for i, j := range pc {
			cands2[i] = cands[j]
		}
		rules2 := make([]RelationshipRule, len(rules))
		for i, j := range pr {
			rules2[i] = rules[j]
		}
		got, gotRels := ResolveReferences(vals, &from, rules2, cands2)
		require.Equal(t, want, got, "independent of order")
		require.Equal(t, wantRels, gotRels, "independent of order")
		for _, r := range gotRels {
			if r.ResourceID != "" {
				require.NotEqual(t, from.ID, r.ResourceID, "never the resource itself")
			}
		}
	})
}
