package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// PRPoller is the producer of pull-request observations: it reads the pull
// request each following run names through ports.PullRequests, writes a
// changed observation with RunObserve and enqueues the run, so the kernel
// sees fresh PR data. Following runs are repo runs in running, pr_opened
// or needs_attention with a PR (the observed one, else the recorded one)
// and pull-request reviews in queued, reviewing or ready. Sweep reads them
// all (every Interval from Run); Refresh reads those following one PR, for
// a webhook delivery. A failed read is logged and retried at the next
// sweep; the kernel keeps deciding on the last observation meanwhile.
type PRPoller struct {
	Store    ports.RunStore
	Queue    ports.Queue
	PRs      ports.PullRequests
	Clock    ports.Clock
	Logger   *slog.Logger
	Interval time.Duration
}

// Run sweeps every Interval until ctx ends.
func (p *PRPoller) Run(ctx context.Context) error {
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		if _, err := p.Sweep(ctx); err != nil && ctx.Err() == nil {
			p.Logger.Warn("pr.poll", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sweep observes the PR of every following run and returns how many
// observations changed.
func (p *PRPoller) Sweep(ctx context.Context) (int, error) { return p.scan(ctx, "") }

// Refresh observes the runs following the PR at url and returns how many
// observations changed.
func (p *PRPoller) Refresh(ctx context.Context, url string) (int, error) { return p.scan(ctx, url) }

// scan walks the following runs, only those following only when set.
func (p *PRPoller) scan(ctx context.Context, only string) (int, error) {
	changed := 0
	for _, k := range []reconcile.RunKind{reconcile.KindRepo, reconcile.KindPRReview} {
		after := ""
		for {
			rows, err := p.Store.RunList(ctx, ports.RunListParams{Kind: k, NonTerminal: true, AfterID: after, Limit: 500})
			if err != nil {
				return changed, fmt.Errorf("pr poll: list %s runs: %w", k, err)
			}
			for _, row := range rows {
				url := followedPR(row)
				if url == "" || (only != "" && url != only) {
					continue
				}
				ok, err := p.observe(ctx, row, url)
				if err != nil {
					p.Logger.Warn("pr.observe", "kind", row.Ref.Kind, "id", row.Ref.ID, "pr", url, "error", err)
					continue
				}
				if ok {
					changed++
				}
			}
			if len(rows) < 500 {
				break
			}
			after = rows[len(rows)-1].Ref.ID
		}
	}
	return changed, nil
}

// followedPR returns the URL of the PR the run follows, or "".
func followedPR(row ports.RunRow) string {
	switch row.Ref.Kind {
	case reconcile.KindRepo:
		switch row.State {
		case reconcile.RepoRunning, reconcile.RepoPROpened, reconcile.RepoNeedsAttention:
		default:
			return ""
		}
		if row.PR != nil && row.PR.URL != "" {
			return row.PR.URL
		}
		var run reconcile.RepoRun
		if json.Unmarshal(row.Body, &run) == nil {
			return run.PR.URL
		}
	case reconcile.KindPRReview:
		var run reconcile.PRReviewRun
		if json.Unmarshal(row.Body, &run) == nil {
			return run.PRURL
		}
	}
	return ""
}

// observe reads the PR and, when it differs from the run's observation,
// records it and enqueues the run.
func (p *PRPoller) observe(ctx context.Context, row ports.RunRow, url string) (bool, error) {
	pr, err := p.PRs.PRGet(ctx, url)
	if err != nil {
		return false, err
	}
	if row.PR != nil && *row.PR == pr {
		return false, nil
	}
	if _, err := p.Store.RunObserve(ctx, ports.RunObserveParams{Ref: row.Ref, PR: &pr}); err != nil {
		return false, fmt.Errorf("record: %w", err)
	}
	if err := p.Queue.WorkEnqueue(ctx, ports.EnqueueParams{Key: Key(row.Ref), EventTime: p.Clock.Now()}); err != nil {
		return true, fmt.Errorf("wake: %w", err)
	}
	return true, nil
}
