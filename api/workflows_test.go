package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
)

// gated is a workflow template: an approval, then a job on agent ext.
var gated = map[string]any{
	"apiVersion": "reconciler.dev/v1", "kind": "WorkflowTemplate", "metadata": map[string]any{"name": "gated"},
	"spec": map[string]any{
		"parameters": []any{map[string]any{"name": "image", "type": "string", "required": true}},
		"tasks": []any{
			map[string]any{"name": "approve", "type": "approval", "approval": map[string]any{"message": "ship {{workflow.parameters.image}}?"}},
			map[string]any{"name": "deploy", "type": "job", "jobAgentRef": "ext", "dependencies": []any{"approve"},
				"config": map[string]any{"image": "{{workflow.parameters.image}}"}},
		},
	},
}

// publish takes a template through the catalog lifecycle over the API.
func (f *fixture) publish(name string, content any) map[string]any {
	f.t.Helper()
	base := "/api/v1/catalog/workflow-template/" + name + "/revisions"
	res := f.do(http.MethodPost, base, "write", map[string]any{"content": content})
	require.Equal(f.t, http.StatusCreated, res.status, string(res.body))
	rev := res.json(f.t)
	id := rev["id"].(string)
	res = f.do(http.MethodPost, base+"/"+id+"/propose", "write", map[string]any{"version": rev["version"]})
	require.Equal(f.t, http.StatusOK, res.status, string(res.body))
	rev = res.json(f.t)
	res = f.do(http.MethodPost, base+"/"+id+"/approve", "approve", map[string]any{"version": rev["version"]})
	require.Equal(f.t, http.StatusOK, res.status, string(res.body))
	return res.json(f.t)
}

func TestCatalogLifecycle(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		rev := f.publish("gated", gated)
		require.Equal(t, "published", rev["lifecycle"])
		require.Equal(t, "user-approve", rev["approved_by"], "the approver is the caller")
		require.Equal(t, "user-write", rev["created_by"], "the creator is the caller")
		require.NotContains(t, rev, "edited_by", "nobody edited it")
		base := "/api/v1/catalog/workflow-template/gated/revisions"

		// A second draft: edit at a stale version is 409, reject needs a reason.
		res := f.do(http.MethodPost, base, "write", map[string]any{"from": 1})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		d := res.json(t)
		id, v := d["id"].(string), d["version"].(float64)
		f.do(http.MethodPut, base+"/"+id, "write", map[string]any{"version": v + 1, "content": gated}).problem(t, http.StatusConflict)
		f.do(http.MethodPost, base, "write", map[string]any{"from": 1}).problem(t, http.StatusConflict)
		p := f.do(http.MethodPut, base+"/"+id, "write", map[string]any{"version": v, "content": map[string]any{"kind": "Nope"}}).problem(t, http.StatusUnprocessableEntity)
		require.NotEmpty(t, p["errors"])
		res = f.do(http.MethodPost, base+"/"+id+"/propose", "write", map[string]any{"version": v})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		v = res.json(t)["version"].(float64)
		f.do(http.MethodPost, base+"/"+id+"/reject", "approve", map[string]any{"version": v}).problem(t, http.StatusUnprocessableEntity)
		f.do(http.MethodPost, base+"/"+id+"/approve", "write", map[string]any{"version": v}).problem(t, http.StatusForbidden)
		res = f.do(http.MethodPost, base+"/"+id+"/reject", "approve", map[string]any{"version": v, "reason": "no"})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		v = res.json(t)["version"].(float64)
		f.do(http.MethodDelete, base+"/"+id+"?version=1", "write", nil).problem(t, http.StatusConflict)
		require.Equal(t, http.StatusNoContent, f.do(http.MethodDelete, base+"/"+id+"?version="+ftoa(v), "write", nil).status)
		f.do(http.MethodGet, base+"/"+id, "read", nil).problem(t, http.StatusNotFound)

		// Published: proposing its deletion, deleting it is refused (409).
		pub := rev["id"].(string)
		res = f.do(http.MethodPost, base+"/"+pub+"/propose-delete", "write", map[string]any{"version": rev["version"]})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Equal(t, "deletion-proposed", res.json(t)["lifecycle"])
		res = f.do(http.MethodGet, base+"?lifecycle=deletion-proposed", "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Contains(t, string(res.body), pub)
		f.do(http.MethodGet, "/api/v1/catalog/gadget/x/revisions", "read", nil).problem(t, http.StatusUnprocessableEntity)
	})
}

func TestCatalogConcurrentEditsConflict(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		base := "/api/v1/catalog/workflow-template/gated/revisions"
		res := f.do(http.MethodPost, base, "write", map[string]any{"content": gated})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		d := res.json(t)
		statuses := concurrently(6, func() int {
			return f.do(http.MethodPut, base+"/"+d["id"].(string), "write", map[string]any{"version": d["version"], "content": gated}).status
		})
		requireOneWins(t, statuses, http.StatusOK)
	})
}

func TestWorkflows(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		f.publish("gated", gated)
		p := f.do(http.MethodPost, "/api/v1/workflows", "write", map[string]any{"template": "gated"}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.parameters.image")
		f.do(http.MethodPost, "/api/v1/workflows", "write", map[string]any{"template": "nope"}).problem(t, http.StatusNotFound)
		res := f.do(http.MethodPost, "/api/v1/workflows", "write", map[string]any{"template": "gated", "id": "wf1", "parameters": map[string]any{"image": "web:2"}})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		require.Equal(t, float64(1), res.json(t)["template_revision"])
		f.do(http.MethodPost, "/api/v1/workflows", "write", map[string]any{"template": "gated", "id": "wf1", "parameters": map[string]any{"image": "web:2"}}).problem(t, http.StatusConflict)
		f.drain()

		st := f.do(http.MethodGet, "/api/v1/workflows/wf1", "read", nil).json(t)
		runs := st["taskRuns"].([]any)
		require.Len(t, runs, 1, "only the approval runs")
		approval := runs[0].(map[string]any)
		require.Equal(t, "Running", approval["phase"])
		require.Equal(t, "waiting for approval (0 of 1): ship web:2?", approval["message"], "approvers see what they approve")
		path := "/api/v1/workflows/wf1/task-runs/" + url.PathEscape(approval["id"].(string)) + "/approve"
		f.do(http.MethodPost, path, "write", nil).problem(t, http.StatusForbidden)
		require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, path, "approve", nil).status)
		f.drain()

		st = f.do(http.MethodGet, "/api/v1/workflows/wf1", "read", nil).json(t)
		var jobID string
		for _, r := range st["taskRuns"].([]any) {
			r := r.(map[string]any)
			if r["task"] == "approve" {
				require.Equal(t, []any{"user-approve"}, r["approved_by"], "the approver is the caller")
			}
			if r["task"] == "deploy" {
				jobID, _ = r["jobId"].(string)
			}
		}
		require.NotEmpty(t, jobID, "the deploy job was dispatched: %v", st)
		f.do(http.MethodPost, "/api/v1/workflows/wf1/task-runs/"+url.PathEscape(approval["id"].(string))+"/approve", "approve", nil).problem(t, http.StatusUnprocessableEntity)
		p = f.do(http.MethodPost, "/api/v1/jobs/"+url.PathEscape(jobID)+"/report", "agent", map[string]any{"status": "successful", "links": map[string]any{"logs": "https://x"}}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.links", "workflow jobs keep no links")
		f.do(http.MethodPost, "/api/v1/jobs/"+url.PathEscape(jobID)+"/report", "agent-elsewhere", map[string]any{"status": "successful"}).problem(t, http.StatusForbidden)
		res = f.do(http.MethodPost, "/api/v1/jobs/"+url.PathEscape(jobID)+"/report", "agent", map[string]any{"status": "successful", "outputs": map[string]any{"url": "https://x"}})
		require.Equal(t, http.StatusNoContent, res.status, string(res.body))
		f.drain()
		st = f.do(http.MethodGet, "/api/v1/workflows/wf1", "read", nil).json(t)
		require.Equal(t, "Succeeded", st["workflow"].(map[string]any)["phase"], "%v", st)

		res = f.do(http.MethodGet, "/api/v1/workflows?limit=1", "read", nil)
		require.Equal(t, http.StatusOK, res.status)
		require.Contains(t, string(res.body), `"wf1"`)
		f.do(http.MethodGet, "/api/v1/workflows/nope", "read", nil).problem(t, http.StatusNotFound)
		f.do(http.MethodPost, "/api/v1/workflows/nope/cancel", "write", nil).problem(t, http.StatusNotFound)

		res = f.do(http.MethodPost, "/api/v1/workflows", "write", map[string]any{"template": "gated", "id": "wf2", "parameters": map[string]any{"image": "web:3"}})
		require.Equal(t, http.StatusCreated, res.status)
		require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, "/api/v1/workflows/wf2/cancel", "write", nil).status)
		f.drain()
		require.Equal(t, "Cancelled", f.do(http.MethodGet, "/api/v1/workflows/wf2", "read", nil).json(t)["workflow"].(map[string]any)["phase"])
	})
}

func ftoa(v float64) string { return url.QueryEscape(jsonNumber(v)) }

// TestCatalogRefusesNUL: a template with a NUL character in a string is
// refused at create and at edit with a 422 naming the field, and nothing is
// stored; on every store.
func TestCatalogRefusesNUL(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		bad := map[string]any{
			"apiVersion": "reconciler.dev/v1", "kind": "WorkflowTemplate", "metadata": map[string]any{"name": "nul"},
			"spec": map[string]any{"tasks": []any{map[string]any{"name": "a", "type": "job", "jobAgentRef": "ext", "config": map[string]any{"image": "web\x00:2"}}}},
		}
		base := "/api/v1/catalog/workflow-template/nul/revisions"
		p := f.do(http.MethodPost, base, "write", map[string]any{"content": bad}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, fmt.Sprint(p), "content.spec.tasks[0].config.image: must not contain a NUL character")
		res := f.do(http.MethodGet, base, "read", nil)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.NotContains(t, string(res.body), `"nul"`, "a refused create stores nothing")

		good := map[string]any{
			"apiVersion": "reconciler.dev/v1", "kind": "WorkflowTemplate", "metadata": map[string]any{"name": "nul"},
			"spec": map[string]any{"tasks": []any{map[string]any{"name": "a", "type": "job", "jobAgentRef": "ext", "config": map[string]any{"image": "web:2"}}}},
		}
		res = f.do(http.MethodPost, base, "write", map[string]any{"content": good})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		d := res.json(t)
		p = f.do(http.MethodPut, base+"/"+d["id"].(string), "write", map[string]any{"version": d["version"], "content": bad}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, fmt.Sprint(p), "content.spec.tasks[0].config.image: must not contain a NUL character")
	})
}

// TestCatalogUnproposeAndUndoProposeDelete: the two withdrawals, with a
// stale version (409), the wrong lifecycle (422) and the scope (403).
func TestCatalogUnproposeAndUndoProposeDelete(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		base := "/api/v1/catalog/workflow-template/gated/revisions"
		res := f.do(http.MethodPost, base, "write", map[string]any{"content": gated})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		rev := res.json(t)
		id := rev["id"].(string)
		f.do(http.MethodPost, base+"/"+id+"/unpropose", "write", map[string]any{"version": rev["version"]}).problem(t, http.StatusUnprocessableEntity)
		res = f.do(http.MethodPost, base+"/"+id+"/propose", "write", map[string]any{"version": rev["version"]})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		v := res.json(t)["version"].(float64)
		f.do(http.MethodPost, base+"/"+id+"/unpropose", "read", map[string]any{"version": v}).problem(t, http.StatusForbidden)
		f.do(http.MethodPost, base+"/"+id+"/unpropose", "write", map[string]any{"version": v - 1}).problem(t, http.StatusConflict)
		res = f.do(http.MethodPost, base+"/"+id+"/unpropose", "write", map[string]any{"version": v})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Equal(t, "draft", res.json(t)["lifecycle"])
		f.do(http.MethodDelete, base+"/"+id+"?version="+ftoa(res.json(t)["version"].(float64)), "write", nil)

		pub := f.publish("gated", gated)
		pid := pub["id"].(string)
		res = f.do(http.MethodPost, base+"/"+pid+"/propose-delete", "write", map[string]any{"version": pub["version"]})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		v = res.json(t)["version"].(float64)
		f.do(http.MethodPost, base+"/"+pid+"/undo-propose-delete", "write", map[string]any{"version": v + 1}).problem(t, http.StatusConflict)
		res = f.do(http.MethodPost, base+"/"+pid+"/undo-propose-delete", "write", map[string]any{"version": v})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Equal(t, "published", res.json(t)["lifecycle"])
		f.do(http.MethodPost, base+"/"+pid+"/undo-propose-delete", "write", map[string]any{"version": res.json(t)["version"]}).problem(t, http.StatusUnprocessableEntity)
	})
}

func TestCatalogListAcrossObjectsAndMetadata(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		// A draft of policy p, template gated published and an open draft
		// of it.
		res := f.do(http.MethodPost, "/api/v1/catalog/policy/p/revisions", "write", map[string]any{"content": map[string]any{
			"id": "p", "workspace_id": "ws", "name": "p", "selector": "true", "enabled": true, "rules": []any{}}})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		pub := f.publish("gated", gated)
		base := "/api/v1/catalog/workflow-template/gated/revisions"
		res = f.do(http.MethodPost, base, "write", map[string]any{"from": 1, "labels": map[string]any{"team": "web"}})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		draft := res.json(t)

		list := func(query string) []string {
			t.Helper()
			res := f.do(http.MethodGet, "/api/v1/catalog/revisions"+query, "read", nil)
			require.Equal(t, http.StatusOK, res.status, string(res.body))
			var rs []ports.Revision
			require.NoError(t, json.Unmarshal(res.body, &rs))
			out := []string{}
			for _, r := range rs {
				if r.Name == "prod-gate" {
					continue // the fixture's policy: in this catalog on Postgres, in the release store's in memory
				}
				out = append(out, string(r.Kind)+"/"+r.Name+"#"+strconv.Itoa(r.Revision)+":"+string(r.Lifecycle))
			}
			return out
		}
		require.ElementsMatch(t, []string{"policy/p#0:draft", "workflow-template/gated#1:published", "workflow-template/gated#0:draft"}, list(""))
		require.Equal(t, []string{"policy/p#0:draft"}, list("?kind=policy"))
		require.ElementsMatch(t, []string{"workflow-template/gated#1:published", "workflow-template/gated#0:draft"}, list("?name=gated"))
		require.ElementsMatch(t, []string{"policy/p#0:draft", "workflow-template/gated#0:draft"}, list("?lifecycle=draft&lifecycle=proposed"))
		require.Equal(t, []string{"workflow-template/gated#0:draft"}, list("?kind=workflow-template&lifecycle=draft"))
		require.Equal(t, []string{"workflow-template/gated#1:published"}, list("?revision=1"))
		require.Equal(t, []string{}, list("?name=nope"))
		for _, q := range []string{"?kind=job", "?lifecycle=gone", "?revision=-1", "?bogus=1"} {
			f.do(http.MethodGet, "/api/v1/catalog/revisions"+q, "read", nil).problem(t, http.StatusUnprocessableEntity)
		}
		f.do(http.MethodGet, "/api/v1/catalog/revisions", "", nil).problem(t, http.StatusUnauthorized)
		f.do(http.MethodGet, "/api/v1/catalog/revisions", "agent", nil).problem(t, http.StatusForbidden)

		// Metadata: labels replaced at the version read, in any lifecycle;
		// annotations absent are kept.
		meta := func(id string) string { return base + "/" + id + "/metadata" }
		pid := pub["id"].(string)
		res = f.do(http.MethodPut, meta(pid), "write", map[string]any{"version": pub["version"], "labels": map[string]any{"tier": "gold"}, "annotations": map[string]any{"note": "kept"}})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		got := res.json(t)
		require.Equal(t, map[string]any{"tier": "gold"}, got["labels"], "a published revision's labels change")
		res = f.do(http.MethodPut, meta(pid), "write", map[string]any{"version": got["version"], "labels": map[string]any{}})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		again := res.json(t)
		require.Empty(t, again["labels"])
		require.Equal(t, map[string]any{"note": "kept"}, again["annotations"])
		did := draft["id"].(string)
		f.do(http.MethodPut, meta(did), "write", map[string]any{"version": draft["version"].(float64) + 1, "labels": map[string]any{"a": "b"}}).problem(t, http.StatusConflict)
		p := f.do(http.MethodPut, meta(did), "write", map[string]any{"version": draft["version"], "labels": map[string]any{"a": "b\x1b[31m"}}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, p["detail"], "control character")
		p = f.do(http.MethodPut, meta(did), "write", map[string]any{"labels": map[string]any{"a": "b"}}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.version")
		f.do(http.MethodPut, meta("nope"), "write", map[string]any{"version": 1, "labels": map[string]any{"a": "b"}}).problem(t, http.StatusNotFound)
		f.do(http.MethodPut, meta(did), "read", map[string]any{"version": draft["version"], "labels": map[string]any{"a": "b"}}).problem(t, http.StatusForbidden)
		res = f.do(http.MethodGet, base+"/"+did, "read", nil)
		require.Equal(t, map[string]any{"team": "web"}, res.json(t)["labels"], "refused changes change nothing")
	})
}
