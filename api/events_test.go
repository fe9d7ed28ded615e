package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// eventsEnv is two API servers ("processes") over one store: in memory
// the same server twice, on PostgreSQL two DBs on one schema, each with
// its own event stream, so a change made through one is streamed by the
// other.
type eventsEnv struct {
	t         *testing.T
	ctx       context.Context
	a, b      *httptest.Server
	workflows ports.WorkflowStore
	// prune applies the retention now (PostgreSQL; memory prunes as it goes).
	prune func()
	// tokens by scope name.
	tokens map[string]string
}

func eventsSetup(t *testing.T, backend string, keep, longPolls int) *eventsEnv {
	t.Helper()
	clock := ports.SystemClock
	e := &eventsEnv{t: t, ctx: t.Context(), tokens: map[string]string{}, prune: func() {}}
	serve := func(rel ports.ReleaseStore, q ports.Queue, wfs ports.WorkflowStore, tokens ports.Tokens, changes ports.ChangeStream, tx ports.Transactor) *httptest.Server {
		s := api.New(api.Options{Releases: rel, Workflows: wfs, Queue: q, Tokens: tokens, Clock: clock, Tx: tx,
			Catalog: catalog.New(rel, catalog.Config{Tx: tx}), Changes: changes, EventsHeartbeat: 20 * time.Millisecond,
			LongPolls: longPolls, ReadWait: time.Second})
		srv := httptest.NewServer(s.Handler())
		t.Cleanup(srv.Close)
		return srv
	}
	var tokens ports.Tokens
	switch backend {
	case "memory":
		changes := memory.NewChanges(clock, keep, 0)
		rel, q := memory.NewReleaseStore(clock), memory.NewQueue(clock)
		rel.SetChanges(changes)
		wfs := memory.NewWorkflowStore()
		wfs.SetChanges(changes)
		tokens = memory.NewTokens()
		e.workflows = wfs
		e.a = serve(rel, q, wfs, tokens, changes, memory.NewTransactor(rel, q))
		e.b = e.a
	case "postgres":
		dsn, _ := pgtest.Schema(t)
		open := func() (*postgres.DB, *postgres.Changes) {
			db, err := postgres.Open(context.Background(), dsn, postgres.WithMaxConns(6))
			require.NoError(t, err)
			t.Cleanup(db.Close)
			require.NoError(t, db.MigrateUp(e.ctx))
			c := postgres.NewChanges(db, keep, 0, 20*time.Millisecond, nil)
			t.Cleanup(c.Close)
			return db, c
		}
		for i := range 2 {
			db, changes := open()
			q := postgres.NewQueue(db, clock)
			t.Cleanup(q.Close)
			rel := postgres.NewReleaseStore(db, clock)
			t.Cleanup(rel.Close)
			wfs := postgres.NewWorkflowStore(db)
			tok := postgres.NewTokens(db)
			srv := serve(rel, q, wfs, tok, changes, db)
			if i == 0 {
				e.a, e.workflows, tokens = srv, wfs, tok
				e.prune = func() { require.NoError(t, changes.Prune(e.ctx)) }
			} else {
				e.b = srv
			}
		}
	}
	for _, s := range []ports.Scope{ports.ScopeRead, ports.ScopeWrite} {
		_, secret, err := api.IssueToken(e.ctx, tokens, clock, "user-"+string(s), []ports.Scope{s})
		require.NoError(t, err)
		e.tokens[string(s)] = secret
	}
	return e
}

// eachEvents runs fn on both backends.
func eachEvents(t *testing.T, keep, longPolls int, fn func(t *testing.T, e *eventsEnv)) {
	for _, name := range []string{"memory", "postgres"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if name == "postgres" {
				pgtest.DSN(t)
			}
			fn(t, eventsSetup(t, name, keep, longPolls))
		})
	}
}

// sseEvent is one event read from a stream.
type sseEvent struct {
	id   int64
	kind string
	data ports.Change
}

// sseStream is an open event stream.
type sseStream struct {
	t      *testing.T
	res    *http.Response
	lines  *bufio.Scanner
	cancel context.CancelFunc
}

// open starts GET /events on srv with the query and headers.
func (e *eventsEnv) open(srv *httptest.Server, query string, headers ...string) (*sseStream, *http.Response) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/events"+query, nil)
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+e.tokens["read"])
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	if res.StatusCode != http.StatusOK {
		e.t.Cleanup(cancel)
		return nil, res
	}
	require.Equal(e.t, "text/event-stream", res.Header.Get("Content-Type"))
	s := &sseStream{t: e.t, res: res, lines: bufio.NewScanner(res.Body), cancel: cancel}
	e.t.Cleanup(s.close)
	return s, res
}

func (s *sseStream) close() {
	s.cancel()
	_ = s.res.Body.Close()
}

// next reads the next event, counting the heartbeats before it.
func (s *sseStream) next() sseEvent {
	s.t.Helper()
	var ev sseEvent
	var data string
	for s.lines.Scan() {
		line := s.lines.Text()
		switch {
		case line == "":
			if data == "" {
				continue
			}
			require.NoError(s.t, json.Unmarshal([]byte(data), &ev.data), data)
			return ev
		case strings.HasPrefix(line, "id: "):
			n, err := strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			require.NoError(s.t, err)
			ev.id = n
		case strings.HasPrefix(line, "event: "):
			ev.kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	s.t.Fatalf("stream ended: %v", s.lines.Err())
	return ev
}

// beat reads until a heartbeat comment.
func (s *sseStream) beat() {
	s.t.Helper()
	for s.lines.Scan() {
		if s.lines.Text() == ": heartbeat" {
			return
		}
	}
	s.t.Fatalf("stream ended: %v", s.lines.Err())
}

// createPolicy opens a draft of policy name through server a's API.
func (e *eventsEnv) createPolicy(srv *httptest.Server, name string) {
	e.t.Helper()
	body := `{"content":{"id":"` + name + `","workspace_id":"ws","name":"` + name + `","selector":"true","enabled":true,"rules":[]}}`
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, srv.URL+"/api/v1/catalog/policy/"+name+"/revisions", strings.NewReader(body))
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+e.tokens["write"])
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	require.Equal(e.t, http.StatusCreated, res.StatusCode, string(b))
}

// workflow creates a workflow in the store (a workflow.status change).
func (e *eventsEnv) workflow(id string) {
	e.t.Helper()
	require.NoError(e.t, e.workflows.WorkflowCreate(e.ctx, ports.WorkflowRecord{ID: id, Name: "w", TemplateName: "w",
		Template: json.RawMessage(`{"kind":"WorkflowTemplate","spec":{"tasks":[]}}`), Phase: workflow.WorkflowPending, CreatedAt: time.Now()}))
}

// TestEventsStream: a change made through one process is streamed by a
// watcher on the other, live, with its id, kind and data; filters keep
// only the kinds asked for; an idle stream sends heartbeats.
func TestEventsStream(t *testing.T) {
	t.Parallel()
	eachEvents(t, 1000, 4, func(t *testing.T, e *eventsEnv) {
		all, _ := e.open(e.b, "")
		wfOnly, _ := e.open(e.b, "?kind=workflow.status")
		e.createPolicy(e.a, "gate")
		ev := all.next()
		require.Equal(t, "catalog.revision", ev.kind)
		require.Equal(t, ev.id, ev.data.ID)
		require.Equal(t, ports.ChangeCatalogRevision, ev.data.Kind)
		require.True(t, strings.HasPrefix(ev.data.Object, "policy/gate/"), ev.data.Object)
		require.JSONEq(t, `{"kind":"policy","name":"gate","lifecycle":"draft","revision":0}`, string(ev.data.Data))

		e.workflow("wf1")
		ev2 := all.next()
		require.Equal(t, "workflow.status", ev2.kind)
		require.Greater(t, ev2.id, ev.id)
		got := wfOnly.next()
		require.Equal(t, ev2.id, got.id, "the kind filter skipped the catalog change")
		require.Equal(t, "wf1", got.data.Object)

		// Idle: a heartbeat comes.
		idle, _ := e.open(e.b, "")
		idle.beat()
	})
}

// TestEventsResume: Last-Event-ID (or ?after) replays the retained changes
// after it, then goes on live; an id older than the retention is 410.
func TestEventsResume(t *testing.T) {
	t.Parallel()
	eachEvents(t, 3, 4, func(t *testing.T, e *eventsEnv) {
		s, _ := e.open(e.b, "", "Last-Event-ID", "0")
		for _, id := range []string{"w1", "w2", "w3"} {
			e.workflow(id)
		}
		var ids []int64
		for range 3 {
			ids = append(ids, s.next().id)
		}
		s.close()

		r, _ := e.open(e.b, "", "Last-Event-ID", strconv.FormatInt(ids[0], 10))
		require.Equal(t, ids[1], r.next().id)
		require.Equal(t, ids[2], r.next().id)
		e.workflow("w4")
		ev := r.next()
		require.Equal(t, "w4", ev.data.Object, "then live")
		q, _ := e.open(e.b, "?after="+strconv.FormatInt(ids[1], 10))
		require.Equal(t, ids[2], q.next().id)

		// Keep is 3: w1 and w2 are pruned once w5 is in.
		e.workflow("w5")
		require.Equal(t, "w5", r.next().data.Object)
		e.prune()
		_, res := e.open(e.b, "", "Last-Event-ID", strconv.FormatInt(ids[0], 10))
		requireProblem(t, res, http.StatusGone, "no longer retained")
	})
}

// TestEventsRefused: bad parameters are 422 naming the field, a missing
// token 401, and streams past the caller's long-poll cap 429.
func TestEventsRefused(t *testing.T) {
	t.Parallel()
	eachEvents(t, 10, 1, func(t *testing.T, e *eventsEnv) {
		_, res := e.open(e.a, "?kind=job.bogus")
		require.Contains(t, requireProblem(t, res, http.StatusUnprocessableEntity, "unknown kind"), "query.kind")
		_, res = e.open(e.a, "", "Last-Event-ID", "abc")
		require.Contains(t, requireProblem(t, res, http.StatusUnprocessableEntity, "event id"), "header.Last-Event-ID")
		res, err := http.Get(e.a.URL + "/api/v1/events")
		require.NoError(t, err)
		requireProblem(t, res, http.StatusUnauthorized, "")

		s, _ := e.open(e.a, "")
		_, res = e.open(e.a, "")
		requireProblem(t, res, http.StatusTooManyRequests, "--max-long-polls")
		s.close()
	})
}

// requireProblem checks a problem answer of status whose detail holds
// detail, and returns its body.
func requireProblem(t *testing.T, res *http.Response, status int, detail string) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, status, res.StatusCode, string(b))
	require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
	require.Contains(t, string(b), detail)
	return string(b)
}

// TestEventsOfWorkflowJobs: a workflow job's creation and status change
// are job.created and job.status changes with its workflow's id, on both
// stores, and its success moves no target's current release.
func TestEventsOfWorkflowJobs(t *testing.T) {
	t.Parallel()
	eachEvents(t, 1000, 4, func(t *testing.T, e *eventsEnv) {
		jobs, _ := e.open(e.b, "?kind=job.created,job.status,target.current")
		wj := e.workflows.(ports.WorkflowJobs)
		at := time.Now()
		row, _, err := wj.WorkflowJobCreate(e.ctx, ports.JobRow{Job: release.Job{ID: "wf/w1/t/0", JobAgentID: "ext", Status: release.JobPending, CreatedAt: at},
			Workflow: &ports.WorkflowJobRef{ID: "w1", Task: "t", TaskRunID: "t"}})
		require.NoError(t, err)
		ev := jobs.next()
		require.Equal(t, "job.created", ev.kind)
		require.Equal(t, "wf/w1/t/0", ev.data.Object)
		require.JSONEq(t, `{"status":"pending","release_id":"","target_key":"","workflow_id":"w1"}`, string(ev.data.Data))
		done := row.Job
		done.Status = release.JobSuccessful
		_, err = wj.WorkflowJobUpdate(e.ctx, done, row.Version, at.Add(time.Second))
		require.NoError(t, err)
		ev = jobs.next()
		require.Equal(t, "job.status", ev.kind)
		require.JSONEq(t, `{"status":"successful","previous":"pending","release_id":"","target_key":"","workflow_id":"w1"}`, string(ev.data.Data))
		e.workflow("after")
		all, _ := e.open(e.b, "", "Last-Event-ID", strconv.FormatInt(ev.id, 10))
		require.Equal(t, "workflow.status", all.next().kind, "no target.current came between")
	})
}
