package catalog_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// template returns a workflow template named deploy whose task b depends
// on deps.
func template(deps string) json.RawMessage {
	return json.RawMessage(`{"apiVersion": "reconciler.dev/v1", "kind": "WorkflowTemplate", "metadata": {"name": "deploy"},
 "spec": {"tasks": [{"name": "a", "type": "wait", "wait": {"duration": 1}, "dependencies": ["b"]},
   {"name": "b", "type": "wait", "wait": {"duration": 1}, "dependencies": [` + deps + `]}]}}`)
}

// policyDoc returns a policy whose selector is selector.
func policyDoc(selector string) json.RawMessage {
	return json.RawMessage(`{"id": "gate", "workspace_id": "ws", "name": "Gate", "selector": ` + selector + `,
 "rules": [{"id": "approvals", "type": "anyApproval", "min_approvals": 1}]}`)
}

// TestDefaultValidators: with no validators configured the service runs the
// kinds' own checks (the template DAG through package workflow, the
// policy's CEL through package policy) on create, edit, propose and
// approve, and a refusal stores nothing.
func TestDefaultValidators(t *testing.T) {
	s, store := setup(t, catalog.Config{})
	ctx := t.Context()

	_, err := s.Create(ctx, catalog.CreateParams{Kind: revision.KindWorkflowTemplate, Name: "deploy", Content: template(`"a"`)})
	require.ErrorIs(t, err, revision.ErrValidation)
	require.ErrorContains(t, err, "dependency cycle")
	_, err = s.Create(ctx, catalog.CreateParams{Kind: revision.KindPolicy, Name: "gate", Content: policyDoc(`"environment.name =="`)})
	require.ErrorIs(t, err, revision.ErrValidation)
	require.ErrorContains(t, err, "selector")
	_, err = s.Create(ctx, catalog.CreateParams{Kind: revision.KindPolicy, Name: "gate", Content: doc(1)})
	require.ErrorIs(t, err, revision.ErrValidation, "a toy document is not a policy")
	all, err := store.CatalogList(ctx, ports.CatalogListParams{})
	require.NoError(t, err)
	require.Empty(t, all, "refused creates store nothing")

	d, err := s.Create(ctx, catalog.CreateParams{Kind: revision.KindWorkflowTemplate, Name: "deploy", Content: template("")})
	require.NoError(t, err)
	_, err = s.Edit(ctx, catalog.EditParams{Ref: d.Ref(), Version: d.Version, Content: template(`"a"`)})
	require.ErrorContains(t, err, "dependency cycle")
	requireSame(t, s, d)

	p, err := s.Create(ctx, catalog.CreateParams{Kind: revision.KindPolicy, Name: "gate", Content: policyDoc(`"environment.name == 'prod'"`)})
	require.NoError(t, err)
	_, err = s.Edit(ctx, catalog.EditParams{Ref: p.Ref(), Version: p.Version, Content: policyDoc(`"environment.name == "`)})
	require.ErrorContains(t, err, "selector")
	requireSame(t, s, p)
}

// TestCheckWorkflowTemplateName: the document's metadata.name must be the
// object's name.
func TestCheckWorkflowTemplateName(t *testing.T) {
	t.Parallel()
	require.NoError(t, catalog.CheckWorkflowTemplate(template(""), "deploy"))
	err := catalog.CheckWorkflowTemplate(template(""), "ship")
	require.ErrorIs(t, err, revision.ErrValidation)
	require.ErrorContains(t, err, `metadata.name: "deploy" must be the catalog object's name "ship"`)

	// A scoped template is stored as name.scope.id.
	scoped := func(meta string) []byte {
		return []byte(strings.Replace(string(template("")), `{"name": "deploy"}`, meta, 1))
	}
	sys := scoped(`{"name": "deploy", "scope": "system"}`)
	require.NoError(t, catalog.CheckWorkflowTemplate(sys, "deploy.system.shop"))
	require.ErrorContains(t, catalog.CheckWorkflowTemplate(sys, "deploy"), "is stored as deploy.system.<system id>")
	dep := scoped(`{"name": "deploy", "scope": "deployment", "scopeId": "api"}`)
	require.NoError(t, catalog.CheckWorkflowTemplate(dep, "deploy.deployment.api"))
	require.ErrorContains(t, catalog.CheckWorkflowTemplate(dep, "deploy.deployment.web"), `scopeId "api" does not match`)
}
