package policy

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/refdoc"
)

// TestPolicyReferenceIsCurrent: docs/policies.md has an entry for every
// rule type and every field of its parameters (with its comment), made
// from this package's source; UPDATE_DOCS=1 (make docs) rewrites it.
func TestPolicyReferenceIsCurrent(t *testing.T) {
	t.Parallel()
	pkg, err := refdoc.Load(".")
	require.NoError(t, err)
	var b strings.Builder
	b.WriteString(`# Policy reference

Generated from the policy package's source by ` + "`make docs`" + `; a test fails when
a rule type or field has no entry. A policy is a catalog object
(docs/catalog.md); apply it as a document of kind Policy, its spec holding the
fields below. A policy belongs to one workspace (` + "`workspace_id`" + `,
` + "`metadata.workspace`" + ` in a document, required: it is refused without one,
however many workspaces there are) and applies only to that workspace's
release targets. Its ` + "`selector`" + ` and the rules' selectors are CEL
(docs/cel.md). Version gates are evaluated cheapest first and stop at the
first denial; job gates gate creating a job; rollback and verification act
after a job.

`)
	pol, ok := pkg.Struct("Policy")
	require.True(t, ok)
	b.WriteString("## Policy\n\n" + pol.Doc + "\n\n" + refdoc.Table(pol.Fields))
	b.WriteString("\nEach rule is `{\"id\": ..., \"type\": ..., ...its fields}`; the id names the rule in verdicts and in policy skips.\n")
	var order []RuleType
	order = append(order, VersionGates...)
	order = append(order, JobGates...)
	var rest []RuleType
	for rt := range specDecoders {
		if !slices.Contains(order, rt) {
			rest = append(rest, rt)
		}
	}
	slices.Sort(rest)
	order = append(order, rest...)
	require.Len(t, order, len(specDecoders), "every rule type once")
	names := make([]string, len(order))
	for i, rt := range order {
		_, get := specDecoders[rt]()
		names[i] = reflect.TypeOf(get()).Name()
	}
	all, err := pkg.Walk(names...)
	require.NoError(t, err)
	for i, s := range all {
		if i >= len(order) { // a struct a rule's fields name
			fmt.Fprintf(&b, "\n## %s\n\n%s\n\n%s", s.Name, s.Doc, refdoc.Table(s.Fields))
			continue
		}
		rt, group := order[i], "version gate"
		switch {
		case slices.Contains(JobGates, rt):
			group = "job gate"
		case !slices.Contains(VersionGates, rt):
			group = "after a job"
		}
		fmt.Fprintf(&b, "\n## `%s` (%s)\n\n%s\n\n", rt, group, s.Doc)
		if len(s.Fields) == 0 {
			b.WriteString("No fields.\n")
		} else {
			b.WriteString(refdoc.Table(s.Fields))
		}
	}
	committed, err := refdoc.WriteOrCompare("../docs/policies.md", b.String())
	require.NoError(t, err, "run make docs")
	require.Equal(t, committed, b.String(), "docs/policies.md is stale: run make docs")
	require.Empty(t, refdoc.Check(append(all, pol)...), "every field has a comment, its entry in the reference")
}
