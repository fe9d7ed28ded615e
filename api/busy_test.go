package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/ports"
)

// busyQueue is a queue whose stats wait for a connection that never comes
// free: they return only when their context ends, and record its lane.
type busyQueue struct {
	ports.Queue
	lane chan ports.Lane
}

func (q busyQueue) WorkStats(ctx context.Context) (map[ports.WorkState]int, error) {
	q.lane <- ports.LaneOf(ctx)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestBusyStoreAnswers503: a read whose store does not answer within
// ReadWait answers 503 with Retry-After as problem+json, never hangs, and
// runs on the read lane.
func TestBusyStoreAnswers503(t *testing.T) {
	t.Parallel()
	mq, rel := memory.NewQueue(ports.SystemClock), memory.NewReleaseStore(ports.SystemClock)
	q := busyQueue{Queue: mq, lane: make(chan ports.Lane, 1)}
	srv := api.New(api.Options{Releases: rel, Queue: q, Tx: memory.NewTransactor(rel, mq), Insecure: true, ReadWait: 50 * time.Millisecond})
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, api.Prefix+"/operations/queue", nil))
	require.Equal(t, ports.LaneRead, <-q.lane)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, rec.Body.String())
	require.Equal(t, "1", rec.Header().Get("Retry-After"))
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	var p struct {
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
	require.Equal(t, http.StatusServiceUnavailable, p.Status)
	require.Contains(t, p.Detail, "busy")
}
