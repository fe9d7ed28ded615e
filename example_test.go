package reconciler_test

import (
	"context"
	"fmt"
	"time"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
)

// Example embeds the engine: a leased work queue (in memory here;
// postgres.NewQueue on a database) and a processor for one kind of item.
// The README shows this example; `make test` compiles and runs it.
func Example() {
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	q := memory.NewQueue(ports.SystemClock)
	e := engine.New(q, engine.Options{PollInterval: 10 * time.Millisecond})
	e.Register("greet", engine.ProcessorFunc(func(ctx context.Context, it engine.Item) engine.Outcome {
		fmt.Println("reconciling", it.Key.ScopeID) // observe, decide, act once
		stop()
		return engine.Done() // or Retry(err), RequeueAt(t), Terminal(err)
	}), engine.KindOptions{})
	_ = q.WorkEnqueue(ctx, ports.EnqueueParams{Key: ports.WorkKey{Kind: "greet", ScopeType: "user", ScopeID: "ada"}})
	_ = e.Run(ctx)
	// Output: reconciling ada
}
