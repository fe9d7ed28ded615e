package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

const vpcRule = `apiVersion: reconciler.dev/v1
kind: RelationshipRule
metadata: {name: cluster-vpc, workspace: demo}
spec:
  name: vpc
  match: 'from.metadata.vpc == to.id && to.kind == "VPC"'
`

// TestRelationshipRulesCLI: apply a RelationshipRule, read it with get
// relationship-rules (the table, and -o yaml that apply takes unchanged),
// a bad match is exit 2 naming the field, and delete removes it.
func TestRelationshipRulesCLI(t *testing.T) {
	t.Parallel()
	url, tok := apiServer(t)
	as := func(s ports.Scope, stdin string, args ...string) cliResult {
		return runCLI(t, stdin, append(args, "--server", url, "--token", tok[s])...)
	}
	r := as(ports.ScopeWrite, vpcRule, "apply", "-f", "-")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "relationshiprule/cluster-vpc created\n", r.stdout)
	r = as(ports.ScopeRead, "", "get", "relationship-rules")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "cluster-vpc")
	require.Contains(t, r.stdout, "workspace demo")
	r = as(ports.ScopeRead, "", "get", "relationship-rule", "cluster-vpc", "-o", "yaml")
	require.Equal(t, 0, r.code, r.stderr)
	r = as(ports.ScopeWrite, r.stdout, "apply", "-f", "-")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "relationshiprule/cluster-vpc unchanged\n", r.stdout)

	r = as(ports.ScopeWrite, vpcRule+"  from_selector: 'resource.kind =='\n", "apply", "-f", "-")
	require.Equal(t, 2, r.code, r.stdout)
	require.Contains(t, r.err.Error(), `RelationshipRule "cluster-vpc": spec.from_selector:`)
	require.Equal(t, 5, as(ports.ScopeRead, vpcRule, "apply", "-f", "-").code, "scope write")

	r = as(ports.ScopeWrite, "", "delete", "relationship-rule", "cluster-vpc")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 4, as(ports.ScopeRead, "", "get", "relationship-rule", "cluster-vpc").code)
}

// TestExplainTextRelations: explain prints each reference variable's
// relation, and why one is unresolved.
func TestExplainTextRelations(t *testing.T) {
	t.Parallel()
	out := explainText(&chain.Explanation{Target: release.ReleaseTarget{DeploymentID: "web", EnvironmentID: "dev", ResourceID: "eu-1"},
		Relations: []release.Relation{
			{Variable: "db", Reference: "database", Path: []string{"id"}, Unresolved: `no resource is related to eu-1 as "database"`},
			{Variable: "region", Reference: "vpc", Path: []string{"metadata", "region"}, Rule: "cluster-vpc", ResourceID: "vpc-1"},
		}})
	require.Contains(t, out, "relations (reference variables):\n"+
		"  db = database.id: unresolved: no resource is related to eu-1 as \"database\"\n"+
		"  region = vpc.metadata.region: rule cluster-vpc, resource vpc-1\n")
}
