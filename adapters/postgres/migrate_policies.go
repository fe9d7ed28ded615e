package postgres

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// goMigrations are the steps of a migration that SQL cannot do, run in the
// migration's transaction after its up file.
var goMigrations = map[int]func(ctx context.Context, tx *sql.Tx) error{
	22: backfillPolicyWorkspaces,
}

// backfillPolicyWorkspaces gives every policy the workspace of the release
// targets its selector matches (or fails to evaluate on: such a target is
// decided by the policy too), in every revision's content. A policy that
// matches no target gets the only workspace when there is exactly one. It
// refuses, naming each policy, when a policy matches targets of several
// workspaces, or none while there are no or several workspaces: the
// operator narrows or deletes those policies, with the previous release,
// and migrates again. A policy that already names a workspace is kept.
func backfillPolicyWorkspaces(ctx context.Context, tx *sql.Tx) error {
	policies, err := latestPolicies(ctx, tx)
	if err != nil {
		return err
	}
	if len(policies) == 0 {
		return nil
	}
	inputs, err := targetInputs(ctx, tx)
	if err != nil {
		return err
	}
	workspaces, err := scanStrings(tx.QueryContext(ctx, "SELECT id FROM release_workspaces ORDER BY id"))
	if err != nil {
		return fmt.Errorf("read workspaces: %w", err)
	}
	var refused []string
	assign := map[string]string{} // policy name -> workspace
	for _, p := range policies {
		if p.WorkspaceID != "" {
			continue
		}
		var matched []string
		for i := range inputs {
			ok, err := p.AppliesTo(inputs[i])
			if (ok || err != nil) && !slices.Contains(matched, inputs[i].Resource.WorkspaceID) {
				matched = append(matched, inputs[i].Resource.WorkspaceID)
			}
		}
		slices.Sort(matched)
		switch {
		case len(matched) == 1:
			assign[p.ID] = matched[0]
		case len(matched) > 1:
			refused = append(refused, fmt.Sprintf("%s matches targets of workspaces %s", p.ID, strings.Join(matched, ", ")))
		case len(workspaces) == 1:
			assign[p.ID] = workspaces[0]
		default:
			refused = append(refused, fmt.Sprintf("%s matches no target and there are %d workspaces", p.ID, len(workspaces)))
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("policies now belong to one workspace, and these cannot be given one: %s; "+
			"narrow each one's selector to the targets of one workspace, or delete it, with the previous release, then migrate again",
			strings.Join(refused, "; "))
	}
	for name, ws := range assign {
		if err := setPolicyWorkspace(ctx, tx, name, ws); err != nil {
			return err
		}
	}
	return nil
}

// latestPolicies decodes, for every policy, its latest published revision,
// or its newest revision when none is published, as the chain reads it.
func latestPolicies(ctx context.Context, tx *sql.Tx) ([]policy.Policy, error) {
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT ON (name) name, content::text FROM catalog_revisions
		WHERE kind = 'policy' ORDER BY name, (lifecycle = 'published') DESC, number DESC, created_at DESC, id`)
	if err != nil {
		return nil, fmt.Errorf("read policies: %w", err)
	}
	defer rows.Close()
	var out []policy.Policy
	for rows.Next() {
		var name, content string
		if err := rows.Scan(&name, &content); err != nil {
			return nil, fmt.Errorf("read policies: %w", err)
		}
		var p policy.Policy
		if err := json.Unmarshal([]byte(content), &p); err != nil {
			return nil, fmt.Errorf("policy %s: %w", name, err)
		}
		p.ID = name
		out = append(out, p)
	}
	return out, rows.Err()
}

// targetInputs reads every release target as a policy selector sees it.
func targetInputs(ctx context.Context, tx *sql.Tx) ([]policy.Input, error) {
	rows, err := tx.QueryContext(ctx, `SELECT t.key, d.doc::text, e.doc::text, r.doc::text FROM release_targets t
		JOIN release_deployments d ON d.id = t.deployment_id
		JOIN release_environments e ON e.id = t.environment_id
		JOIN release_resources r ON r.id = t.resource_id ORDER BY t.key`)
	if err != nil {
		return nil, fmt.Errorf("read release targets: %w", err)
	}
	defer rows.Close()
	var out []policy.Input
	for rows.Next() {
		var key, d, e, r string
		if err := rows.Scan(&key, &d, &e, &r); err != nil {
			return nil, fmt.Errorf("read release targets: %w", err)
		}
		var in policy.Input
		for _, x := range []struct {
			doc string
			v   any
		}{{d, &in.Deployment}, {e, &in.Environment}, {r, &in.Resource}} {
			if err := json.Unmarshal([]byte(x.doc), x.v); err != nil {
				return nil, fmt.Errorf("release target %s: %w", key, err)
			}
		}
		out = append(out, in)
	}
	return out, rows.Err()
}

// setPolicyWorkspace adds "workspace_id" to the content of every revision
// of the policy, leaving the rest of each content byte for byte as it was
// approved.
func setPolicyWorkspace(ctx context.Context, tx *sql.Tx, name, ws string) error {
	type rev struct{ id, content string }
	rows, err := tx.QueryContext(ctx, "SELECT id, content::text FROM catalog_revisions WHERE kind = 'policy' AND name = $1", name)
	if err != nil {
		return fmt.Errorf("policy %s: %w", name, err)
	}
	var revs []rev
	for rows.Next() {
		var r rev
		if err := rows.Scan(&r.id, &r.content); err != nil {
			rows.Close()
			return fmt.Errorf("policy %s: %w", name, err)
		}
		revs = append(revs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("policy %s: %w", name, err)
	}
	for _, r := range revs {
		content, err := withWorkspace([]byte(r.content), ws)
		if err != nil {
			return fmt.Errorf("policy %s revision %s: %w", name, r.id, err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE catalog_revisions SET content = $1::json WHERE kind = 'policy' AND name = $2 AND id = $3",
			string(content), name, r.id); err != nil {
			return fmt.Errorf("policy %s revision %s: %w", name, r.id, err)
		}
	}
	return nil
}

// withWorkspace returns the JSON object content with "workspace_id": ws as
// its first member; a content that names one already is kept.
func withWorkspace(content []byte, ws string) ([]byte, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(content, &probe); err != nil {
		return nil, err
	}
	if _, ok := probe["workspace_id"]; ok {
		return content, nil
	}
	if err := release.CheckObjectID("workspace_id", ws); err != nil {
		return nil, err
	}
	body := bytes.TrimLeft(content, " \t\r\n")[1:] // after "{"
	member, err := json.Marshal(ws)
	if err != nil {
		return nil, err
	}
	out := append([]byte(`{"workspace_id":`), member...)
	if len(probe) > 0 {
		out = append(out, ',')
	}
	return append(out, body...), nil
}
