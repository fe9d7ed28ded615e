package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
)

// planNotices collects the plans auto_explain sends a session as notices:
// every statement's, those run inside the queue's functions included.
type planNotices struct {
	mu    sync.Mutex
	on    bool
	plans []string
}

// option makes every connection of a DB load auto_explain and send it the
// analyzed plan of each statement, nested ones included, as JSON notices.
func (p *planNotices) option() Option {
	return func(o *openOptions) {
		o.pool.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			p.mu.Lock()
			defer p.mu.Unlock()
			if i := strings.Index(n.Message, "{"); p.on && i >= 0 {
				p.plans = append(p.plans, n.Message[i:])
			}
		}
		o.pool.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, `LOAD 'auto_explain'`)
			if err != nil {
				return fmt.Errorf("load auto_explain: %w", err)
			}
			for _, set := range []string{"log_min_duration = 0", "log_nested_statements = on", "log_analyze = on",
				"log_format = json", "log_level = notice"} {
				if _, err := c.Exec(ctx, "SET auto_explain."+set); err != nil {
					return fmt.Errorf("auto_explain.%s: %w", set, err)
				}
			}
			return nil
		}
	}
}

// record runs fn and returns the plans of the statements it ran.
func (p *planNotices) record(fn func()) []string {
	p.mu.Lock()
	p.on, p.plans = true, nil
	p.mu.Unlock()
	fn()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = false
	return p.plans
}

// planNode is the part of an EXPLAIN (FORMAT JSON) node the checks read.
type planNode struct {
	NodeType   string     `json:"Node Type"`
	Relation   string     `json:"Relation Name"`
	ActualRows float64    `json:"Actual Rows"`
	Loops      float64    `json:"Actual Loops"`
	Plans      []planNode `json:"Plans"`
}

// checkQueuePlan fails when plan (one auto_explain JSON notice) was
// compiled by JIT, reads the queue table with a sequential or bitmap scan,
// or sorts more than most rows.
func checkQueuePlan(t *testing.T, name, plan string, most int) {
	t.Helper()
	var doc struct {
		Query string          `json:"Query Text"`
		Plan  planNode        `json:"Plan"`
		JIT   json.RawMessage `json:"JIT"`
	}
	require.NoError(t, json.Unmarshal([]byte(plan), &doc), "%s: %s", name, plan)
	require.Empty(t, string(doc.JIT), "%s: compiled by JIT (a second per call at scale):\n%s", name, doc.Query)
	var walk func(n planNode)
	walk = func(n planNode) {
		switch n.NodeType {
		case "Seq Scan", "Bitmap Heap Scan":
			require.NotEqual(t, "reconcile_work_scope", n.Relation, "%s: %s of the queue:\n%s\n%s", name, n.NodeType, doc.Query, plan)
		case "Sort", "Incremental Sort":
			require.LessOrEqual(t, n.ActualRows*max(n.Loops, 1), float64(most), "%s: sorts %v rows:\n%s\n%s",
				name, n.ActualRows, doc.Query, plan)
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(doc.Plan)
}

// TestQueuePlansAtScale: over a queue of 50,000 ready items in two
// workspaces, analyzed, with a lease of 2,048 out, the queue's hot
// statements (a lease as big as the engine takes, the acks by tuple id
// and by key, an enqueue that coalesces) and the statements inside their
// functions are planned without JIT, read the queue table through its
// indexes only and sort no more than a lease's candidates. At 100,000
// items JIT alone made each lease take a second (bench release
// --targets 100000: 482 targets/s, against 1,665 at 30,000): the
// candidates' estimated cost grows with the queue.
//
// It runs twice: with the sessions DB.Open makes (JIT off), and with
// sessions that ask for JIT (the lease's function turns it off itself,
// migration 0028).
func TestQueuePlansAtScale(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, params, jit string }{
		{"Open's sessions", "", "off"},
		{"sessions with jit on", "jit=on", "on"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dsn, _ := pgtest.Schema(t)
			if c.params != "" {
				sep := "?"
				if strings.Contains(dsn, "?") {
					sep = "&"
				}
				dsn += sep + c.params
			}
			queuePlansAtScale(t, dsn, c.jit)
		})
	}
}

// queuePlansAtScale is TestQueuePlansAtScale on a fresh schema named by
// dsn, whose sessions have jit set to jit.
func queuePlansAtScale(t *testing.T, dsn, jit string) {
	const items, limit = 50000, 2048
	ctx := t.Context()
	plans := &planNotices{}
	// One connection each, so every statement runs where auto_explain is.
	db, q, byKey := ackQueues(t, dsn, "by key", WithMaxConns(1), plans.option())
	var got string
	require.NoError(t, db.pool.QueryRow(ctx, "SHOW jit").Scan(&got))
	require.Equal(t, jit, got, "the session's jit")
	for i := 0; i < items; i += 1000 {
		ps := make([]ports.EnqueueParams, 0, 1000)
		for j := i; j < i+1000; j++ {
			// Nearly all in one workspace, a few in another: the fair
			// lease reads both.
			ws := "big"
			if j%50 == 0 {
				ws = "small"
			}
			ps = append(ps, ports.EnqueueParams{Key: ports.WorkKey{Kind: "k", ScopeType: "item", ScopeID: fmt.Sprintf("t%06d", j)},
				Workspace: ws})
		}
		require.NoError(t, q.WorkEnqueue(ctx, ps...))
	}
	_, err := db.pool.Exec(ctx, "ANALYZE reconcile_work_scope")
	require.NoError(t, err)

	var leases []ports.Lease
	steps := []struct {
		name string
		run  func()
	}{
		{"lease", func() {
			leases, err = q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"k"}, Limit: limit, Duration: time.Minute, Owner: "w"})
			require.NoError(t, err)
			require.Len(t, leases, limit)
		}},
		{"ack by tuple id", func() { ackAll(t, q, leases[:limit/2]) }},
		{"ack by key", func() { ackAll(t, byKey, leases[limit/2:]) }},
		{"enqueue", func() {
			ps := make([]ports.EnqueueParams, 0, 1000)
			for j := 0; j < 2*limit; j += 2*limit/1000 + 1 {
				ps = append(ps, ports.EnqueueParams{Key: ports.WorkKey{Kind: "k", ScopeType: "item", ScopeID: fmt.Sprintf("t%06d", j)}})
			}
			require.NoError(t, q.WorkEnqueue(ctx, ps...))
		}},
	}
	for _, s := range steps {
		got := plans.record(s.run)
		require.NotEmpty(t, got, "%s: no plans came (is auto_explain loaded?)", s.name)
		for _, p := range got {
			checkQueuePlan(t, s.name, p, 2*limit)
		}
	}
}

// ackAll acks leases through q, each without error.
func ackAll(t *testing.T, q *Queue, leases []ports.Lease) {
	t.Helper()
	acks := make([]ports.AckParams, len(leases))
	for i := range leases {
		acks[i] = ports.AckParams{Lease: leases[i].Ref()}
	}
	res, err := q.WorkAck(t.Context(), acks...)
	require.NoError(t, err)
	for _, e := range res {
		require.NoError(t, e)
	}
}
