package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/workflow"
)

// lineBuffer is a command's output that tests can wait on.
type lineBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func newLineBuffer() *lineBuffer { return &lineBuffer{wrote: make(chan struct{}, 1)} }

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return b.buf.Write(p)
}

// await waits until the output holds s, and returns it.
func (b *lineBuffer) await(t *testing.T, s string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		b.mu.Lock()
		out := b.buf.String()
		b.mu.Unlock()
		if strings.Contains(out, s) {
			return out
		}
		select {
		case <-b.wrote:
		case <-deadline:
			t.Fatalf("output never held %q:\n%s", s, out)
		}
	}
}

// startWatch runs the command tree with args until the test ends or
// stop is called; it returns the output and the command's result.
func startWatch(t *testing.T, args ...string) (*lineBuffer, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	out := newLineBuffer()
	cmd := newRootCmd()
	cmd.SetOut(out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(args)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return out, stop
}

func watchWorkflow(t *testing.T, be *backend, id string) {
	t.Helper()
	require.NoError(t, be.workflows.WorkflowCreate(t.Context(), ports.WorkflowRecord{ID: id, Name: "w", TemplateName: "w",
		Template: json.RawMessage(`{"kind":"WorkflowTemplate","spec":{"tasks":[]}}`), Phase: workflow.WorkflowPending, CreatedAt: time.Now()}))
}

// TestGetWatchServer: get workflows --watch prints the list, then each
// change as it comes, through --server; -o json prints one object a line;
// an interrupt ends it without an error.
func TestGetWatchServer(t *testing.T) {
	t.Setenv("RECONCILER_DSN", "")
	be, err := openBackend(t.Context(), "", false, ports.SystemClock)
	require.NoError(t, err)
	be.startChanges(100, time.Hour, ports.SystemClock, nil)
	srv := httptest.NewServer(api.New(api.Options{Releases: be.releases, Workflows: be.workflows, Queue: be.queue,
		Tokens: be.tokens, Insecure: true, Changes: be.changes}).Handler())
	t.Cleanup(srv.Close)
	watchWorkflow(t, be, "before")

	out, stop := startWatch(t, "get", "workflows", "--watch", "--server", srv.URL, "--token", "x")
	out.await(t, "before")
	watchWorkflow(t, be, "after")
	out.await(t, "workflow.status  after  phase=Pending")
	require.NoError(t, stop(), "an interrupt ends the watch")

	js, stopJSON := startWatch(t, "get", "workflows", "-w", "-o", "json", "--server", srv.URL, "--token", "x")
	js.await(t, `"items"`)
	watchWorkflow(t, be, "third")
	text := js.await(t, `"object":"third"`)
	last := text[strings.LastIndex(strings.TrimSpace(text), "\n")+1:]
	var ch ports.Change
	require.NoError(t, json.Unmarshal([]byte(last), &ch), last)
	require.Equal(t, ports.ChangeWorkflowStatus, ch.Kind)
	require.NoError(t, stopJSON())
}

// TestGetWatchDSN: with --dsn the API in the process streams the changes
// another process writes to the database (the list is printed once the
// stream is open, so the change after it is seen).
func TestGetWatchDSN(t *testing.T) {
	t.Setenv("RECONCILER_DSN", "")
	dsn, _ := pgtest.Schema(t)
	be, err := openBackend(t.Context(), dsn, true, ports.SystemClock)
	require.NoError(t, err)
	t.Cleanup(be.close)

	out, stop := startWatch(t, "get", "workflows", "--watch", "--dsn", dsn)
	out.await(t, "ID")
	watchWorkflow(t, be, "from-elsewhere")
	out.await(t, "workflow.status  from-elsewhere  phase=Pending")
	require.NoError(t, stop())
}
