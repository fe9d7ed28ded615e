package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/adapters/envsecret"
	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/adapters/testrunner"
	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/console"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/internal/tracing"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

type serveOptions struct {
	dsn string
	// otlpEndpoint turns on trace export (internal/tracing); empty: off.
	otlpEndpoint    string
	connectTimeout  time.Duration
	migrate         bool
	listen          string
	adminListen     string
	concurrency     int
	lock            time.Duration
	resyncInterval  time.Duration
	stallThreshold  time.Duration
	maxAutoResumes  int
	unknownPodGrace time.Duration
	shutdownTimeout time.Duration
	globalSlots     int
	repoSlots       int
	logLevel        string
	logFormat       string
	demo            bool
	demoDir         string
	// demoAsked: --demo (or RECONCILER_DEMO) was given, not defaulted.
	demoAsked       bool
	secretPrefix    string
	secretDirs      []string
	insecureNoAuth  bool
	consoleRefresh  time.Duration
	apiReadWait     time.Duration
	eventsKeep      int
	eventsRetention time.Duration
	http            httpOptions
	agents          agentOptions
	code            codeHostOptions
	outbound        outboundOptions
	logOut          io.Writer      // where the log goes; nil is standard error
	opened          func(*backend) // tests: called once the backend is open (to issue tokens)
}

// newServeCmd runs the engine.
func newServeCmd() *cobra.Command {
	def := reconcile.DefaultConfig()
	o := serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the reconciliation engine (in memory, or on Postgres with --dsn)",
		Long: `serve runs the engine: it leases work by kind, takes pure decisions and applies
them under compare-and-swap, and sweeps every non-terminal run periodically.

Without --dsn it runs on the embedded in-memory adapters and, unless
--demo=false, seeds a demo: one run of each kind, in a simulated world of
agents and pull requests, and the release workspace of testdata/demo
(dev, staging and prod; v1 rolls out, v2 stops before prod for want of an
approval). Their decisions scroll by in the log. With --dsn, --demo (or
--demo-dir) given explicitly applies the release workspace to the database
(through apply: a second start changes nothing) and pushes its versions; the
simulated runs stay in memory only.
With --dsn (or
RECONCILER_DSN) it runs on PostgreSQL, applying migrations first; several serve
processes on one database share the work safely.

Every flag can also be set as RECONCILER_<FLAG> (e.g. RECONCILER_LOCK=45s);
a flag given on the command line wins. SIGINT/SIGTERM stop leasing and let
in-flight passes finish (up to --shutdown-timeout); a second signal exits at once.

Agents of the four run kinds run as local processes (the process runtime;
the demo simulates them instead and says so): --agent-command with its
--agent-arg list starts in <--agent-workdir>/<kind>/<id> with only PATH,
RECONCILER_RUN_KIND/ID/PURPOSE/TRIGGER/WORKDIR, --agent-env and
--agent-secret variables (never serve's own environment); with
--agent-user (serve running as root) it runs as that user, out of reach
of serve's /proc/<pid>/environ; its output goes to agent.log there. Its start,
heartbeat and exit are recorded on the run, which is woken at once; a
release sends SIGTERM, then SIGKILL after --agent-stop-grace. A repo
agent also gets RECONCILER_REPO and RECONCILER_BRANCH (reconciler/<id>).
Each agent runs under this binary as its supervisor, in a session of its
own, which records its exit code under <--agent-workdir>/.state: agents
outlive serve (a crash, or a stop), and a serve restarted on the same
--agent-workdir adopts them (no second launch) and records their real exit.
With --runtime kubernetes each launch is a pod instead, in --kube-namespace,
from --kube-pod-template (a YAML pod template) with --kube-image,
--agent-command/--agent-arg and --agent-env (no --agent-secret: reference a
Kubernetes Secret in the template), reached through the kubeconfig behind
--kube-kubeconfig-ref (default: the in-cluster config); an informer records
its phase, heartbeat and exit on the run, a release deletes it (grace
--agent-stop-grace), and pods outlive serve: a restart adopts them.

With --github-token the code host is GitHub (--github-api): a repo agent
that exits 0 gets a pull request from its branch, following runs' pull
requests are read every --pr-poll-interval and at once on a webhook
delivery signed with --github-webhook-secret (POST /api/v1/webhooks/github),
auto-merge uses --github-merge-method, and a review run posts the review
its agent wrote to $RECONCILER_REVIEW_FILE: review.md in its directory
(verdict in review-event; at most 60000 bytes) or, under --runtime
kubernetes, the container's termination message (first line
"review-event: VERDICT" optional; Kubernetes keeps 4096 bytes), recorded
on the run with the agent's exit; a longer review is cut and says so. Without it pull
requests are only recorded. serve logs a warning naming every stand-in
(the demo's simulated world, the recording code host) and shows it in
/readyz?verbose.

Workflow secrets (sensitive variables) are resolved when a job or request is
sent: env:NAME reads the daemon's variable NAME (only names with
--secret-prefix), file:/path a file under a --secret-dir. A secret goes
only where --secret-destination binds its reference (without it: only to
https://api.github.com, https://app.terraform.io and Datadog's API
sites); kubernetes-job runs pods only in
--kubernetes-namespace as --kubernetes-service-account, never privileged
or on the host's network, PIDs, IPC or files. See docs/security.md.

Health: GET /healthz, /readyz (add ?verbose, or /readyz/<check>); metrics: /metrics.

API: /api/v1 (OpenAPI at /api/v1/openapi.json). Every call needs
Authorization: Bearer TOKEN with the scope it names. In memory, serve prints a
fresh admin token at start on standard output; with --dsn, create tokens with
` + "`reconciler token create --dsn DSN`" + `. --insecure-no-auth serves without
tokens and is refused unless --listen is a loopback address; it then also
refuses a request whose Host is not a loopback name (DNS rebinding) and an
API write that is not JSON or comes from another site.

Listener: --read-header-timeout, --read-timeout, --write-timeout (a pull
agent's waiting take gets its wait on top; an event stream has none) and
--idle-timeout bound slow and idle clients; --max-long-polls caps the
waiting takes and event streams of one token or agent (429 with
Retry-After beyond).

Event stream: GET /api/v1/events streams committed changes (Server-Sent
Events, resumable with Last-Event-ID); --events-keep and --events-retention
bound what a resuming client can replay (older: 410). --tls-cert-file/--tls-key-file serve
TLS (the pair is re-read when it changes); behind a TLS proxy, give
--public-url https://... so the console's cookie is Secure. See
docs/security.md.

Web console: / on --listen (log in with a token; actions need the scope the
API asks for: approve, write, admin). A login opens a session token of its
own (12h at most) that logout revokes. Its live parts follow the event
stream; they poll every --console-refresh only while the stream fails.

Profiling: /debug/pprof only on the separate --admin-listen listener (off by
default; keep it on loopback).

Traces: off unless --otlp-endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT) names
an OpenTelemetry collector's OTLP/HTTP URL: then every API request, queue
pass, outbound call and release-chain transaction is a span, and the trace
context travels with the work to the jobs and agents (docs/guide.md,
"Traces").

Logs: --log-format text (default; one readable line a decision, release ids
cut to 16 characters) or json (one object a line).`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := envFallback(cmd); err != nil {
				return err
			}
			_, demoEnv := os.LookupEnv("RECONCILER_DEMO")
			o.demoAsked = cmd.Flags().Changed("demo") || demoEnv
			return runServe(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	dsnFlag(f, &o.dsn)
	connectTimeoutFlag(f, &o.connectTimeout)
	f.BoolVar(&o.migrate, "migrate", true, "apply database migrations at start (Postgres only)")
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address of the health, metrics and API listener; empty disables it")
	f.StringVar(&o.adminListen, "admin-listen", "", "address of the admin listener serving /debug/pprof (e.g. 127.0.0.1:6060); empty (the default) disables it; never served on --listen")
	intRangeVar(f, &o.concurrency, "concurrency", def.Concurrency, 1, 1024, "parallel reconcile passes per kind")
	durationRangeVar(f, &o.lock, "lock", def.LockDuration, time.Second, time.Hour, "work-item lease; renewed while a pass runs, for at most 10 leases (then the pass is cancelled and retried); also each test-runner job's lease and each external agent follower's")
	durationRangeVar(f, &o.resyncInterval, "resync-interval", def.ResyncInterval, time.Second, 24*time.Hour, "full sweep cadence: non-terminal runs and workflows, every release target")
	durationRangeVar(f, &o.stallThreshold, "stall-threshold", def.StallThreshold, time.Second, 30*24*time.Hour, "heartbeat staleness threshold")
	intRangeVar(f, &o.maxAutoResumes, "max-auto-resumes", def.MaxAutoResumes, 1, 1000, "cap on automatic resumes between manual actions")
	durationRangeVar(f, &o.unknownPodGrace, "unknown-pod-grace", def.UnknownPodGrace, time.Second, 24*time.Hour, "how long a pod may stay in the unknown phase before its run counts it as lost")
	durationRangeVar(f, &o.shutdownTimeout, "shutdown-timeout", 10*time.Second, 100*time.Millisecond, time.Hour, "how long in-flight passes may finish after a stop signal")
	intRangeVar(f, &o.globalSlots, "global-slots", 0, 0, 1_000_000, "most agents running at once across all runs (0 = unlimited)")
	intRangeVar(f, &o.repoSlots, "repo-slots", 0, 0, 1_000_000, "most agents running at once per repository (0 = unlimited)")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error (debug logs every snapshot, replayable with decide)")
	f.StringVar(&o.logFormat, "log-format", "text", "text or json")
	f.BoolVar(&o.demo, "demo", true, "in memory: seed the demo runs and release workspace; with --dsn, given explicitly: apply the release workspace (idempotent)")
	f.StringVar(&o.demoDir, "demo-dir", "", "load the release demo from this directory's release.yaml (default: testdata/demo, built in); with --dsn it applies it")
	f.StringVar(&o.secretPrefix, "secret-prefix", envsecret.DefaultPrefix, "workflow secrets referenced as env:NAME must have names with this prefix")
	f.StringArrayVar(&o.secretDirs, "secret-dir", nil, "directory workflow secrets referenced as file:/path may be read from; repeat for several")
	httpFlags(f, &o.http)
	agentFlags(f, &o.agents)
	codeHostFlags(f, &o.code)
	outboundFlags(f, &o.outbound)
	f.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", "export traces over OTLP/HTTP to this collector URL (e.g. http://127.0.0.1:4318; a URL without a path gets /v1/traces); empty (the default, unless OTEL_EXPORTER_OTLP_ENDPOINT is set): no traces are recorded or exported")
	durationRangeVar(f, &o.apiReadWait, "api-read-wait", 2*time.Second, 100*time.Millisecond, time.Hour, "how long an API read (GET) may wait for the store, its wait for a connection of the read lane included; past it the API answers 503 with Retry-After")
	intRangeVar(f, &o.eventsKeep, "events-keep", defaultEventsKeep, 1, 10_000_000, "how many of the newest changes GET /api/v1/events can replay to a client resuming with Last-Event-ID")
	durationRangeVar(f, &o.eventsRetention, "events-retention", defaultEventsRetention, time.Minute, 30*24*time.Hour, "how long a change stays replayable by GET /api/v1/events (an older resume point is 410)")
	durationRangeVar(f, &o.consoleRefresh, "console-refresh", console.DefaultRefresh, 100*time.Millisecond, time.Hour, "how often the web console's live parts (grid, target state, running workflows) poll when the event stream fails (they follow it otherwise)")
	f.BoolVar(&o.insecureNoAuth, "insecure-no-auth", false, "serve the API without tokens (every caller is admin \"anonymous\"); only on a loopback --listen")
	return cmd
}

// releaseDemo reports whether serve seeds the release demo: in memory
// unless --demo=false; on PostgreSQL only when asked for (--demo or
// --demo-dir given), since it writes to a lasting database (idempotently:
// a second start changes nothing). The runs' simulated world stays
// memory-only.
func (o *serveOptions) releaseDemo() bool {
	if o.dsn == "" {
		return o.demo
	}
	return o.demo && (o.demoAsked || o.demoDir != "")
}

// startTracing exports traces to endpoint until stop, which flushes the
// spans still queued (for at most 5 s).
func startTracing(ctx context.Context, endpoint string, log *slog.Logger) (stop func(), err error) {
	shutdown, err := tracing.Export(ctx, endpoint, currentBuild().Version)
	if err != nil {
		return nil, usagef("--otlp-endpoint: %v", err)
	}
	log.Info("exporting traces", "endpoint", endpoint)
	return func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(fctx); err != nil {
			log.Warn("trace export", "error", err)
		}
	}, nil
}

func runServe(ctx context.Context, cmdOut io.Writer, o serveOptions) error {
	if o.logOut == nil {
		o.logOut = os.Stderr
	}
	log, err := newLogger(o.logOut, o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	routeKlog(log)
	if o.insecureNoAuth && !loopback(o.listen) {
		return usagef("--insecure-no-auth: refused on %q, which is not a loopback address (use 127.0.0.1:PORT or [::1]:PORT)", o.listen)
	}
	if err := o.http.check(); err != nil {
		return err
	}
	if err := o.outbound.check(); err != nil {
		return err
	}
	if o.otlpEndpoint == "" {
		o.otlpEndpoint = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if o.otlpEndpoint != "" {
		if err := tracing.CheckEndpoint(o.otlpEndpoint); err != nil {
			return usagef("--otlp-endpoint: %v", err)
		}
	}
	var tlsCert *certReloader
	if o.http.tlsCertFile != "" {
		if tlsCert, err = newCertReloader(o.http.tlsCertFile, o.http.tlsKeyFile, log); err != nil {
			return err
		}
	}
	for _, dir := range o.secretDirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return usagef("--secret-dir %q: not a directory that can be read", dir)
		}
	}
	clock := ports.SystemClock
	be, err := openBackend(ctx, o.dsn, o.migrate, clock, postgres.WithConnectTimeout(o.connectTimeout),
		postgres.WithLockWaitNotice(func(pid int) {
			log.Warn("waiting for the migration lock held by another process", "pid", pid)
		}))
	if err != nil {
		return err
	}
	be.startChanges(o.eventsKeep, o.eventsRetention, clock, log)
	defer be.close()
	if o.otlpEndpoint != "" {
		stop, err := startTracing(ctx, o.otlpEndpoint, log)
		if err != nil {
			return err
		}
		defer stop()
		be.queue = tracing.Queue(be.queue) // the trace context travels with the work
	}
	if o.opened != nil {
		o.opened(be)
	}

	reg := prometheus.NewRegistry()
	metrics := registerMetrics(reg, be.queue, clock, be.db)
	// The engine leases under the process's liveness owner (below), so a
	// queue judging leases by liveness rows never takes this process's
	// items while it beats. A random suffix keeps a restarted process
	// (same host and pid, as pid 1 in a container) from passing for the
	// one that died.
	eng := engine.New(be.queue, engine.Options{
		Logger: log, LeaseDuration: o.lock, ShutdownTimeout: o.shutdownTimeout, Metrics: metrics.engine,
		Owner: engine.DefaultOwner() + "-" + rand.Text()[:8],
	})
	cfg := reconcile.Config{Concurrency: o.concurrency, LockDuration: o.lock, ResyncInterval: o.resyncInterval,
		StallThreshold: o.stallThreshold, MaxAutoResumes: o.maxAutoResumes, UnknownPodGrace: o.unknownPodGrace}
	secrets := envsecret.Resolver{Prefix: o.secretPrefix, Dirs: o.secretDirs}
	gh, err := newGitHubHost(ctx, o.code, be.runs, be.queue, secrets, clock, log, o.outbound.guard)
	if err != nil {
		return err
	}
	var exit func(context.Context, reconcile.RunRef, string, *ports.RunObserveParams)
	if gh != nil {
		exit = gh.exit
	}
	procs, err := newAgentRuntime(ctx, o.agents, be.runs, be.queue, secrets, clock, log, exit)
	if err != nil {
		return err
	}
	defer procs.close()
	var code ports.CodeHost // nil: none configured, newRunWorld records
	if gh != nil {
		code = gh
	}
	demo := o.demo && o.dsn == ""
	releaseDemo := o.releaseDemo()
	var demoRelease *demoWorkspace
	if releaseDemo {
		fsys, where, err := demoFS(o.demoDir)
		if err != nil {
			return err
		}
		if demoRelease, err = loadReleaseDemo(fsys, where); err != nil {
			return usageError{err}
		}
	}
	world := newRunWorld(be, clock, demo, procs.AgentRuntime, code)
	defer world.close()
	world.warn(log)
	if demo {
		log.Info("demo: agents and pull requests are simulated; no agent process runs (serve --demo=false runs the process runtime)")
		if err := seedDemo(ctx, be.runs, be.queue); err != nil {
			return err
		}
	}
	for _, k := range reconcile.Kinds {
		eng.Register(string(k), &runs.Processor{
			Kind: k, Store: be.runs, Queue: be.queue, Agents: world.agents, Code: world.code, Config: cfg,
			Clock: clock, Logger: log, GlobalSlots: o.globalSlots, RepoSlots: o.repoSlots, Metrics: eng.Metrics(),
		}, engine.KindOptions{Concurrency: o.concurrency})
	}
	rt := newReleaseRuntime(be.releases, be.workflows, be.catalog, be.queue, clock, log, o.outbound.secrets(secrets), &o.outbound, testrunner.WithLease(o.lock))
	defer rt.close()
	rt.triggers.Changes = be.changes // hook events wake the triggers through the event stream's publisher
	rt.register(eng, o.concurrency)
	// The process's liveness row: jobs its in-process agents run and the
	// queue items it leases are never lost while it beats.
	rt.chain.Owner, rt.chain.Liveness = eng.Owner(), &engine.OwnLiveness{Liveness: be.liveness()}
	liveCtx, stopLive := context.WithCancel(ctx)
	liveDone := make(chan struct{})
	go func() {
		defer close(liveDone)
		engine.KeepAlive(liveCtx, rt.chain.Liveness, rt.chain.Owner, o.lock, clock, log, metrics.engine)
	}()
	defer func() { stopLive(); <-liveDone }()
	if releaseDemo {
		if err := seedReleaseDemo(ctx, rt.chain, be.catalog, be.tx, demoRelease); err != nil {
			return err
		}
		if !demo {
			log.Info("demo: release workspace applied", "store", be.name)
		}
	}
	resync := &engine.Resync{Queue: be.queue, Interval: o.resyncInterval, Clock: clock, Logger: log,
		Sources: append([]engine.ResyncSource{runs.NonTerminal(be.runs, reconcile.Kinds...)}, rt.resyncSources()...)}

	extra := map[string]http.Handler{}
	if o.listen != "" {
		catCfg := be.catalogConfig()
		catCfg.Validators = o.outbound.catalogValidators() // a policy's providers send secrets only where bound
		cat := catalog.New(be.catalog, catCfg)
		apiSrv := api.New(api.Options{Chain: rt.chain, Flows: rt.flows, Catalog: cat,
			Releases: be.releases, Workflows: be.workflows, Queue: be.queue, Tokens: be.tokens, Secrets: secrets, Clock: clock, Logger: log, Insecure: o.insecureNoAuth,
			Runs: &runs.Control{Store: be.runs, Queue: be.queue, Clock: clock}, Metrics: metrics.api, Tx: be.tx, Audit: be.audit, AgentConfig: withOperatorLimits(withHMACKeys(agentConfigValidator(), secrets), &o.outbound),
			Pull: rt.pullService(be, clock), ReadWait: o.apiReadWait, LongPolls: o.http.maxLongPolls, Changes: be.changes})
		if o.dsn == "" && !o.insecureNoAuth {
			if err := printAdminToken(ctx, cmdOut, be.tokens, clock); err != nil {
				return err
			}
		}
		extra[api.Prefix+"/"] = apiSrv.Handler()
		extra["/"] = console.New(console.Options{Chain: rt.chain, Flows: rt.flows, Catalog: cat, Releases: be.releases,
			Workflows: be.workflows, Runs: be.runs, Queue: be.queue, Tokens: be.tokens, Clock: clock, Logger: log,
			Insecure: o.insecureNoAuth, Refresh: o.consoleRefresh, Changes: be.changes, Audit: be.audit, Tx: be.tx, SecureCookie: o.http.secureCookies()}).Handler()
	}
	if o.listen != "" {
		var hook http.Handler
		if gh != nil && gh.hook != nil && !demo {
			hook = gh.hook
		}
		mountWebhooks(extra, githubActionsWebhooks{agents: be.releases.JobAgents(), secrets: secrets, report: rt.report,
			deliveries: deliveryClaims(be.tokens, clock)}, hook)
	}
	handler := newHTTPHandler(be, reg, extra, world)
	if o.insecureNoAuth {
		handler = insecureGuard(handler)
	}
	srv, err := startHTTP(log, "listening", o.listen, o.http.server(handler, false), tlsCert)
	if err != nil {
		return err
	}
	admin, err := startHTTP(log, "admin listening", o.adminListen, o.http.server(newAdminHandler(), true), nil)
	if err != nil {
		if srv != nil {
			_ = srv.Close()
		}
		return err
	}
	log.Info("engine starting", "store", be.name, "demo", demo, "kinds", eng.Kinds(), "concurrency", o.concurrency, "lease", o.lock)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = resync.Run(ctx) }()
	wg.Add(1)
	go func() { defer wg.Done(); rt.triggers.Listen(ctx) }()
	if gh != nil && !demo {
		wg.Add(1)
		go func() { defer wg.Done(); _ = gh.poller.Run(ctx) }()
	}
	err = eng.Run(ctx)
	wg.Wait()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range []*http.Server{srv, admin} {
		if s != nil {
			_ = s.Shutdown(sctx)
		}
	}
	log.Info("engine stopped")
	return err
}

// serveMetrics are the metrics serve records: the engine's (passes,
// lease renewals lost, and the processors' decisions, jobs and
// measurements) and the API's requests.
type serveMetrics struct {
	engine *engine.Metrics
	api    *api.Metrics
}

// registerMetrics registers everything /metrics exports on reg: the Go
// runtime and process collectors, the queue's state, the database pools'
// waits by lane (none when db is nil), the engine's counters and the
// API's, which it returns for them to record.
func registerMetrics(reg prometheus.Registerer, q ports.Queue, clock ports.Clock, db *postgres.DB) serveMetrics {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&engine.QueueCollector{Queue: q, Clock: clock}, &postgres.PoolCollector{DB: db})
	return serveMetrics{engine: engine.NewMetrics(reg), api: api.NewMetrics(reg)}
}

// newHTTPHandler serves health checks, metrics and the extra handlers
// (the GitHub webhook receiver) by path. The runtime check names the run
// kinds' outside world, so a stand-in shows in /readyz?verbose.
func newHTTPHandler(be *backend, reg *prometheus.Registry, extra map[string]http.Handler, world runWorld) http.Handler {
	mux := http.NewServeMux()
	for path, h := range extra {
		mux.Handle(path, h)
	}
	checks := map[string]check{
		"queue":   func(ctx context.Context) (string, error) { _, err := be.queue.WorkStats(ctx); return "", err },
		"runtime": func(context.Context) (string, error) { return world.detail(), nil },
	}
	mux.Handle("/healthz", healthHandler(nil))
	mux.Handle("/healthz/", healthHandler(nil))
	mux.Handle("/readyz", healthHandler(checks))
	mux.Handle("/readyz/", healthHandler(checks))
	mux.Handle("/metrics", promhttpHandler(reg))
	return mux
}

// startHTTP runs srv on addr in the background (over TLS with cert when
// it is not nil) and logs msg with the bound address; an empty addr
// serves nothing (nil server).
func startHTTP(log *slog.Logger, msg, addr string, srv *http.Server, cert *certReloader) (*http.Server, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	if cert != nil {
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cert.GetCertificate}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "addr", addr, "error", err)
		}
	}()
	log.Info(msg, "addr", ln.Addr().String())
	return srv, nil
}

// newAdminHandler serves the runtime profiles of net/http/pprof, on the
// admin listener only.
func newAdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
