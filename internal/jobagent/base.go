// Package jobagent is the base every job agent that runs jobs on an
// external system builds on (argo-cd, argo-workflows, github-actions,
// terraform-cloud, kubernetes-job): its Options, the outbound HTTP
// client, the follower (jobfollow.Tracker), each dispatched job's config
// for CancelJob, and the answer to a config no retry can fix.
//
// An agent embeds *Base[C], C being its parsed job config, and gets Type,
// Close and JobLease from it; its Dispatch hands its start function to
// Start, its ResumeJob (ports.JobResumer) a function that finds the run by
// the job's external id to Resume.
//
// Invariants: Adapters share code only through it (they never import each
// other); an agent's `Type` and `Close` are the base's
package jobagent

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/jobfollow"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Options configures an external agent; zero fields take defaults.
type Options struct {
	// HTTP tunes the agent's client (timeouts, retries, caps); New sets
	// its Adapter. Agents that call no HTTP API ignore it.
	HTTP outbound.Options
	// MinPoll and MaxPoll bound the follower's polling backoff (defaults
	// 2s and 30s).
	MinPoll, MaxPoll time.Duration
	// Lease is the lease the agent's followers hold on their jobs
	// (ports.JobLeaser), renewed every third of it while they follow; when
	// the process dies it runs out and a process resumes the job
	// (ports.JobResumer). Zero holds none: a job outlives its follower.
	Lease  time.Duration
	Logger *slog.Logger
}

// Base is what every external agent shares. It is goroutine-safe; Close
// it when done.
type Base[C any] struct {
	// HTTP is the agent's one outbound client.
	HTTP *outbound.Client
	// Secrets resolves credentials, per request.
	Secrets ports.SecretResolver

	typ   string
	lease time.Duration
	track *jobfollow.Tracker

	mu   sync.Mutex
	cfgs map[string]C // by job id, for CancelJob
}

// New returns the base of the agent of type typ, reporting through
// reporter and reading credentials through secrets.
func New[C any](typ string, reporter ports.JobReporter, secrets ports.SecretResolver, o Options) *Base[C] {
	o.HTTP.Adapter = typ
	return &Base[C]{HTTP: outbound.New(o.HTTP), Secrets: secrets, typ: typ, lease: max(o.Lease, 0), cfgs: map[string]C{},
		track: jobfollow.New(jobfollow.Options{Adapter: typ, Reporter: reporter, Logger: o.Logger, MinPoll: o.MinPoll, MaxPoll: o.MaxPoll,
			Lease: max(o.Lease, 0)})}
}

// Type returns the release.JobAgent.Type the agent serves.
func (b *Base[C]) Type() string { return b.typ }

// Close stops following the agent's runs and waits for its followers.
func (b *Base[C]) Close() { b.track.Close() }

// JobLease is the lease the agent's followers hold (Options.Lease); zero
// when they hold none.
func (b *Base[C]) JobLease() time.Duration { return b.lease }

// Start dispatches d once per job id (jobfollow.Tracker.Dispatch): start
// finds or starts the external run and returns how to follow it. A vendor's
// refusal that will not change (outbound.IsRefusal) ends the job
// invalidJobAgent with the vendor's message instead of being retried.
func (b *Base[C]) Start(ctx context.Context, d ports.JobDispatch, start func(ctx context.Context) (jobfollow.Started, error)) (ports.JobDispatchResult, error) {
	return b.track.Dispatch(ctx, d, b.endRefused(start))
}

// endRefused wraps start: an error carrying a vendor's refusal that will
// not change ends the job invalidJobAgent with the vendor's message.
func (b *Base[C]) endRefused(start func(ctx context.Context) (jobfollow.Started, error)) func(ctx context.Context) (jobfollow.Started, error) {
	return func(ctx context.Context) (jobfollow.Started, error) {
		st, err := start(ctx)
		if err != nil && outbound.IsRefusal(err) {
			return b.Invalid(errors.New(outbound.Message(err)))
		}
		return st, err
	}
}

// Resume follows d's job again (jobfollow.Tracker.Resume). A job whose
// dispatch answered an external id is followed by it, never started again
// (one that is gone is reported so): parse reads its config (a refusal
// ends the job invalidJobAgent), follow returns how to follow the run of
// that id (its Poll, and Watch if any; an error wrapping
// release.ErrInvalid ends it invalidJobAgent too), and the run's state now
// is the answer. A job without an external id is handed to start, which
// finds the run by the correlation key before it starts one.
func (b *Base[C]) Resume(ctx context.Context, d ports.JobDispatch, parse func(map[string]any) (C, error),
	follow func(ctx context.Context, cfg C) (jobfollow.Started, error), start func(ctx context.Context) (jobfollow.Started, error)) (ports.JobDispatchResult, error) {
	if d.Job.ExternalID == "" {
		return b.track.Resume(ctx, d, b.endRefused(start))
	}
	return b.track.Resume(ctx, d, b.endRefused(func(ctx context.Context) (jobfollow.Started, error) {
		cfg, err := parse(d.Job.JobAgentConfig)
		if err != nil {
			return b.Invalid(err)
		}
		f, err := follow(ctx, cfg)
		if errors.Is(err, release.ErrInvalid) {
			return b.Invalid(err)
		}
		if err != nil {
			return jobfollow.Started{}, err
		}
		st, err := f.Poll(ctx)
		if err != nil {
			return jobfollow.Started{}, err
		}
		b.Remember(d.Job.ID, cfg)
		f.Result = ports.JobDispatchResult{ExternalID: d.Job.ExternalID, Status: st.Status, Message: st.Message}
		return f, nil
	}))
}

// Remember keeps job id's config for CancelJob.
func (b *Base[C]) Remember(jobID string, cfg C) {
	b.mu.Lock()
	b.cfgs[jobID] = cfg
	b.mu.Unlock()
}

// ConfigOf is the config Remember kept for job id, if any.
func (b *Base[C]) ConfigOf(jobID string) (C, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.cfgs[jobID]
	return c, ok
}

// Invalid is the start of a job whose config no retry can fix (bad
// config, an unreadable credential, a resource the system does not have):
// it ends invalidJobAgent, the message naming the agent and, through err,
// the field.
func (b *Base[C]) Invalid(err error) (jobfollow.Started, error) {
	return jobfollow.Started{Result: ports.JobDispatchResult{Status: release.JobInvalidJobAgent, Message: b.typ + ": " + err.Error()}}, nil
}

// Bearer is the request header carrying the token secret reference ref
// names (field names it in errors), resolved now for requests to dest (the
// API root the token is sent to; see configmap.ResolveTo).
func (b *Base[C]) Bearer(ctx context.Context, field, ref, dest string) (http.Header, error) {
	token, err := configmap.ResolveTo(ctx, b.Secrets, field, ref, dest)
	if err != nil {
		return nil, err
	}
	return http.Header{"Authorization": {"Bearer " + token}}, nil
}
