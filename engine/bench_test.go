package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
)

// BenchmarkEngineNoop: the engine's own cost per item (lease, pass, ack)
// on the in-memory queue, with a processor that does nothing, as bench
// queue runs it: one engine, 256 items in flight.
func BenchmarkEngineNoop(b *testing.B) {
	q := memory.NewQueue(ports.SystemClock)
	ps := make([]ports.EnqueueParams, b.N)
	for i := range ps {
		ps[i] = ports.EnqueueParams{Key: ports.WorkKey{Kind: "k", ScopeType: "t", ScopeID: fmt.Sprint(i)}}
	}
	if err := q.WorkEnqueue(context.Background(), ps...); err != nil {
		b.Fatal(err)
	}
	var done atomic.Int64
	all := make(chan struct{})
	eng := engine.New(q, engine.Options{Logger: quietLogger(), PollInterval: 10 * time.Millisecond})
	eng.Register("k", engine.ProcessorFunc(func(context.Context, engine.Item) engine.Outcome {
		if done.Add(1) == int64(b.N) {
			close(all)
		}
		return engine.Done()
	}), engine.KindOptions{Concurrency: 256})
	ctx, cancel := context.WithCancel(context.Background())
	b.ReportAllocs()
	b.ResetTimer()
	ran := make(chan error, 1)
	go func() { ran <- eng.Run(ctx) }()
	<-all
	b.StopTimer()
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
}
