package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/reconcilerhq/reconciler/adapters/github"
	"github.com/reconcilerhq/reconciler/adapters/process"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/internal/netguard"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// codeHostOptions configure the github code host of serve.
type codeHostOptions struct {
	api           string
	token         string
	mergeMethod   string
	webhookSecret string
	pollInterval  time.Duration
}

// codeHostFlags binds the github code host's flags.
func codeHostFlags(f *pflag.FlagSet, o *codeHostOptions) {
	f.StringVar(&o.token, "github-token", "", "GitHub API token reference (env:NAME with --secret-prefix, or file:/path under a --secret-dir); empty: no code host, pull requests are only recorded")
	f.StringVar(&o.api, "github-api", github.DefaultBaseURL, "GitHub REST API root")
	f.StringVar(&o.mergeMethod, "github-merge-method", "merge", "how auto-merge merges: merge, squash or rebase")
	f.StringVar(&o.webhookSecret, "github-webhook-secret", "", "reference of the secret GitHub signs webhook deliveries with; set, POST /api/v1/webhooks/github wakes the runs a delivery concerns")
	f.DurationVar(&o.pollInterval, "pr-poll-interval", 30*time.Second, "how often the pull requests of following runs are read")
}

// githubHost is the github code host with serve's glue: the PR poller, the
// webhook receiver, and the hooks that open a repo agent's pull request
// and hand a review agent's text to the review it posts.
type githubHost struct {
	client *github.Client
	poller *runs.PRPoller
	// hook is the webhook receiver; nil without a webhook secret.
	hook  http.Handler
	store ports.RunStore
	log   *slog.Logger
}

// newGitHubHost returns nil when no token is configured.
func newGitHubHost(ctx context.Context, o codeHostOptions, store ports.RunStore, q ports.Queue, secrets ports.SecretResolver, clock ports.Clock, log *slog.Logger, guard *netguard.Guard) (*githubHost, error) {
	if o.token == "" {
		return nil, nil
	}
	if o.pollInterval <= 0 {
		return nil, usagef("--pr-poll-interval must be positive")
	}
	c, err := github.New(github.Config{BaseURL: o.api, Token: release.SecretRef{Ref: o.token}, MergeMethod: o.mergeMethod, Guard: guard}, secrets)
	if err != nil {
		return nil, usagef("--github-token/--github-merge-method: %v", err)
	}
	h := &githubHost{client: c, store: store, log: log,
		poller: &runs.PRPoller{Store: store, Queue: q, PRs: c, Clock: clock, Logger: log, Interval: o.pollInterval}}
	if o.webhookSecret != "" {
		secret, err := secrets.Resolve(ctx, release.SecretRef{Ref: o.webhookSecret})
		if err != nil {
			return nil, usagef("--github-webhook-secret: %v", err)
		}
		h.hook = github.Webhook{Secret: []byte(secret), OnPR: func(ctx context.Context, e github.PREvent) {
			if _, err := h.poller.Refresh(ctx, e.URL); err != nil {
				log.Warn("github.webhook", "event", e.Event, "pr", e.URL, "error", err)
			}
		}}
	}
	return h, nil
}

// exit is the process runtime's exit hook: a repo agent that exited 0
// gets the pull request of its branch (opened, or the open one), recorded
// with the exit so the kernel sees both at once.
func (h *githubHost) exit(ctx context.Context, ref reconcile.RunRef, _ string, o *ports.RunObserveParams) {
	if ref.Kind != reconcile.KindRepo || o.Pod == nil || o.Pod.ExitCode == nil || *o.Pod.ExitCode != 0 {
		return
	}
	row, err := h.store.RunGet(ctx, ref)
	if err != nil {
		h.log.Warn("github.open_pr", "kind", ref.Kind, "id", ref.ID, "error", err)
		return
	}
	pr, err := h.client.PROpen(ctx, ports.PROpenParams{Repo: row.Repo, Head: process.Branch(ref),
		Title: "reconciler: " + ref.ID, Body: "Opened for run " + ref.String() + "."})
	if err != nil {
		h.log.Warn("github.open_pr", "kind", ref.Kind, "id", ref.ID, "error", err)
		return
	}
	o.PR = &pr
}

// PRMerge merges through GitHub.
func (h *githubHost) PRMerge(ctx context.Context, p ports.PRMergeParams) error {
	return h.client.PRMerge(ctx, p)
}

// PRSubmitReview posts the review the review agent wrote, as its runtime
// reported it with the agent's exit (the run's review draft: review.md
// and review-event in a process agent's directory, a pod's termination
// message): its body and verdict, on the commit the review looked at.
func (h *githubHost) PRSubmitReview(ctx context.Context, p ports.PRSubmitParams) error {
	if row, err := h.store.RunGet(ctx, p.Ref); err == nil {
		var run reconcile.PRReviewRun
		if json.Unmarshal(row.Body, &run) == nil {
			p.HeadSHA = run.ReviewedSHA
			if d := run.Review; d != nil {
				p.Body = d.Body
				if d.Event != "" {
					p.Event = d.Event
				}
			}
		}
	}
	if err := h.client.PRSubmitReview(ctx, p); err != nil {
		return fmt.Errorf("submit review of %s: %w", p.Ref, err)
	}
	return nil
}
