package process

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// TestAgentRuntimeConformance runs the AgentRuntime suite against real
// `sh` processes. The runtime's own account of what it did is its log:
// Launched counts agent.start records (each names the started process's
// pid), Released agent.release records.
func TestAgentRuntimeConformance(t *testing.T) {
	t.Parallel()
	porttest.AgentRuntime(t, func(t *testing.T) porttest.AgentRuntimeFixture {
		events := &eventLog{}
		// The agent lives until it is released or the test ends (Close).
		cfg := Config{Command: "sh", Args: []string{"-c", "echo started; exec sleep 60"}, WorkRoot: t.TempDir(),
			StopGrace: 5 * time.Second, Heartbeat: time.Hour, LandWait: time.Second}
		rt, err := New(cfg, Options{Store: rowStore{}, Logger: slog.New(events)})
		require.NoError(t, err)
		t.Cleanup(rt.Close)
		return porttest.AgentRuntimeFixture{
			Runtime: rt,
			Launched: func(ref reconcile.RunRef) int {
				pids := events.pids("agent.start", ref)
				for _, pid := range pids {
					require.Positive(t, pid, "a started agent is a real process")
				}
				return len(pids)
			},
			Released: func(ref reconcile.RunRef) int { return len(events.pids("agent.release", ref)) },
		}
	})
}

// rowStore is the part of a run store a launch reads: every run exists,
// belongs to acme/suite and is in no state an agent's observation waits
// for, so the observers end at once and write nothing.
type rowStore struct{ ports.RunStore }

func (rowStore) RunGet(_ context.Context, ref reconcile.RunRef) (ports.RunRow, error) {
	return ports.RunRow{Ref: ref, Repo: "acme/suite"}, nil
}

// eventLog is a slog.Handler keeping each record's message, run and pid.
type eventLog struct {
	mu     sync.Mutex
	events []event
}

type event struct {
	msg string
	ref reconcile.RunRef
	pid int
}

func (l *eventLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *eventLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *eventLog) WithGroup(string) slog.Handler            { return l }

func (l *eventLog) Handle(_ context.Context, r slog.Record) error {
	e := event{msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "kind":
			e.ref.Kind = reconcile.RunKind(a.Value.String())
		case "id":
			e.ref.ID = a.Value.String()
		case "pid":
			e.pid = int(a.Value.Int64())
		}
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
	return nil
}

// pids returns the pids of the records with message msg about ref.
func (l *eventLog) pids(msg string, ref reconcile.RunRef) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for _, e := range l.events {
		if e.msg == msg && e.ref == ref {
			out = append(out, e.pid)
		}
	}
	return out
}
