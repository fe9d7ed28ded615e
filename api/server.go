package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/reconcilerhq/reconciler/engine/apply"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/engine/live"
	"github.com/reconcilerhq/reconciler/engine/pull"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// Prefix is where the API is mounted.
const Prefix = "/api/v1"

// DefaultMaxBodyBytes caps request bodies (413 beyond it).
const DefaultMaxBodyBytes = 1 << 20

// Options are the services and stores the API serves.
type Options struct {
	// Chain is the release chain (versions, approvals, jobs, explain).
	Chain *chain.Chain
	// Flows is the workflow controller.
	Flows *flow.Controller
	// Catalog is the revisioned catalog of workflow templates and policies.
	Catalog *catalog.Service
	// Releases and Workflows are read directly for lists and gets.
	Releases  ports.ReleaseStore
	Workflows ports.WorkflowStore
	// Runs creates runs of the four kinds, stores their control intents
	// and messages; its Store is read for lists, gets and decisions.
	Runs *runs.Control
	// Queue is read and redriven by the operations routes, and receives
	// the work object writes affect (engine/live).
	Queue ports.Queue
	// Tokens authenticates requests and stores signed reports' nonces.
	Tokens ports.Tokens
	// Secrets resolves the job agents' report_secret references for
	// signed job reports; nil refuses signed reports.
	Secrets ports.SecretResolver
	Clock   ports.Clock
	Logger  *slog.Logger
	// Insecure serves without authentication: every request acts as
	// InsecurePrincipal ("anonymous" when empty) with every scope. Only
	// for loopback listeners and in-process use (the CLI on --dsn).
	Insecure          bool
	InsecurePrincipal string
	// MaxBodyBytes caps request bodies; zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Metrics counts requests by route and status (nil: none).
	Metrics *Metrics
	// Tx makes an apply or a document delete all or nothing (the release
	// store's and the queue's transactor); the apply routes need it. An
	// object write and the work it enqueues (engine/live) are one
	// transaction with it; nil: Releases when it is a ports.Transactor,
	// else none (the write and its enqueues are then not atomic).
	Tx ports.Transactor
	// Audit records every write the API accepts (GET /api/v1/audit reads
	// it), in the write's own transaction when Tx is set (the handler runs
	// in it); nil records none (writes are still logged as "audit" lines).
	Audit ports.AuditLog
	// AgentConfig checks a job agent's config by its type at apply; nil
	// accepts any.
	AgentConfig apply.AgentConfigValidator
	// ReadWait bounds each GET operation's store reads, the wait for a
	// connection of the store's read lane (ports.LaneRead) included: past
	// it the operation answers 503 with Retry-After. Zero: unbounded.
	ReadWait time.Duration
	// Pull serves pull agents' takes, heartbeats and reports (api/pull.go);
	// nil answers them 404.
	Pull *pull.Service
	// LongPolls caps the long-polls (takes with ?wait) one caller (token,
	// or signing agent) may hold open at once, 429 beyond; zero means
	// DefaultLongPolls.
	LongPolls int
	// Changes is the event stream GET /events serves (each stream counts
	// as a long-poll); nil answers it 404. EventsHeartbeat is how often an
	// idle stream sends a comment; zero means DefaultEventsHeartbeat.
	Changes         ports.ChangeStream
	EventsHeartbeat time.Duration
}

// PolicyRule documents the JSON shape of a policy rule (policy.Rule): its
// id and type, and that type's parameters beside them.
type PolicyRule struct {
	_    struct{}        `additionalProperties:"true"`
	ID   string          `json:"id"`
	Type policy.RuleType `json:"type" enum:"versionSelector,versionCooldown,anyApproval,deploymentWindow,deploymentDependency,environmentProgression,gradualRollout,concurrency,retry,rollback,verification"`
}

// Server is the API: New builds it, Handler serves it.
type Server struct {
	o   Options
	api huma.API
	mux *http.ServeMux
	// live is the store object writes go through; nil without a queue.
	live *live.Store
	// polls counts open long-polls by caller.
	polls *longPolls
	// frames encodes each streamed change once (GET /events); hub reads
	// the changes once for all streams (nil without Options.Changes).
	frames frameCache
	hub    *changeHub
}

// New builds the API over o and registers every operation.
func New(o Options) *Server {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Clock == nil {
		o.Clock = ports.SystemClock
	}
	if o.LongPolls <= 0 {
		o.LongPolls = DefaultLongPolls
	}
	mux := http.NewServeMux()
	cfg := huma.DefaultConfig("reconciler API", "1")
	// The document is served by openAPIHandler (it needs a token); no docs
	// page (it would load scripts from a CDN) and no $schema links.
	cfg.OpenAPIPath, cfg.DocsPath, cfg.SchemasPath, cfg.CreateHooks = "", "", "", nil
	cfg.RejectUnknownQueryParameters = true
	cfg.Info.Description = "The reconciler control plane: release chain, jobs and workflows. " +
		"Every operation needs `Authorization: Bearer TOKEN` with the scope it names; " +
		"job agents may instead sign reports (HMAC-SHA256, see the report operation)."
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		securityBearer:    {Type: "http", Scheme: "bearer", Description: "an API token (reconciler token create)"},
		securitySignature: {Type: "apiKey", In: "header", Name: SignatureHeader, Description: "sha256= and the lowercase hex HMAC-SHA256 of TIMESTAMP.METHOD.PATH.SUBJECT.BODY with the job agent's report secret"},
	}
	// reconcile.Settings: every field optional, durations as strings.
	cfg.Components.Schemas.RegisterTypeAlias(reflect.TypeFor[reconcile.Settings](), reflect.TypeFor[RunSettings]())
	// policy.Rule has its own JSON shape (id, type and the type's fields).
	cfg.Components.Schemas.RegisterTypeAlias(reflect.TypeFor[policy.Rule](), reflect.TypeFor[PolicyRule]())
	s := &Server{o: o, mux: mux, polls: &longPolls{open: map[string]int{}, max: o.LongPolls}}
	s.api = humago.New(mux, cfg)
	s.api.UseMiddleware(s.authenticate, s.longPoll, s.auditWrites)
	s.registerAudit()
	s.registerVersions()
	s.registerTargets()
	s.registerTargetDecisions()
	s.registerJobs()
	s.registerWorkflows()
	s.registerCatalog()
	s.registerOperations()
	s.registerRuns()
	s.registerTokens()
	s.registerPull()
	if o.Changes != nil {
		s.hub = &changeHub{src: o.Changes, log: o.Logger, encode: s.frames.frame}
	}
	s.registerEvents()
	if o.Releases != nil && o.Queue != nil {
		tx := o.Tx
		if tx == nil {
			tx, _ = o.Releases.(ports.Transactor)
		}
		if tx == nil {
			tx = live.NoTx{}
		}
		s.live = live.New(o.Releases, o.Queue, tx)
	}
	s.registerObjects()
	s.registerApply()
	mux.Handle("GET "+Prefix+"/openapi.json", s.openAPIHandler())
	mux.Handle(Prefix+"/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, http.StatusNotFound, "no operation "+r.Method+" "+r.URL.Path)
	}))
	return s
}

// Handler serves the API; mount it at "/api/v1/" or at the root.
func (s *Server) Handler() http.Handler {
	return traced(s.o.Metrics.middleware(refuseUndecodable(s.mux)))
}

// OpenAPI is the API's OpenAPI 3.1 document, as served.
func (s *Server) OpenAPI() ([]byte, error) {
	b, err := json.MarshalIndent(s.api.OpenAPI(), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode openapi: %w", err)
	}
	return append(b, '\n'), nil
}

func (s *Server) openAPIHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, status, msg := s.principalOf(r.Context(), r.Header.Get("Authorization"), ports.ScopeRead); status != 0 {
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="reconciler"`)
			}
			writeProblem(w, status, msg)
			return
		}
		b, err := s.OpenAPI()
		if err != nil {
			writeProblem(w, http.StatusInternalServerError, "internal error")
			return
		}
		w.Header().Set("Content-Type", "application/openapi+json")
		_, _ = w.Write(b)
	})
}

// writeProblem writes an RFC 9457 problem outside huma's operations.
func writeProblem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(huma.ErrorModel{Title: http.StatusText(status), Status: status, Detail: detail})
}

// op describes an operation: its id, method, path (under Prefix), summary
// and the scope it needs.
func (s *Server) op(id, method, path, summary string, scope ports.Scope, tags ...string) huma.Operation {
	errs := []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity}
	if method == http.MethodGet {
		errs = append(errs, http.StatusServiceUnavailable) // ReadWait
	}
	return huma.Operation{
		OperationID:  id,
		Method:       method,
		Path:         Prefix + path,
		Summary:      summary,
		Description:  summary + ". Needs scope `" + string(scope) + "`.",
		Tags:         tags,
		MaxBodyBytes: s.o.MaxBodyBytes,
		Security:     []map[string][]string{{securityBearer: {}}},
		Metadata:     map[string]any{metaScope: scope},
		Errors:       errs,
	}
}

// fail turns an engine or store error into its problem; anything that is
// not the caller's fault is logged and hidden behind a 500.
func (s *Server) fail(ctx context.Context, err error) error {
	if p := problem(err); p != nil {
		return p
	}
	if errors.Is(err, ports.ErrBusy) || errors.Is(err, context.DeadlineExceeded) {
		// Only ReadWait puts a deadline on an operation: the store was too
		// busy to answer in time. Said, never a silent timeout.
		s.o.Logger.WarnContext(ctx, "api.busy", "read_wait", s.o.ReadWait, "error", err)
		return huma.ErrorWithHeaders(huma.Error503ServiceUnavailable("the store is busy: retry later"),
			http.Header{"Retry-After": {strconv.Itoa(retryAfterSeconds)}})
	}
	s.o.Logger.ErrorContext(ctx, "api.error", "error", err)
	return huma.Error500InternalServerError("internal error")
}

// retryAfterSeconds is the Retry-After of a 503 for a busy store.
const retryAfterSeconds = 1

// failPage is fail for a page read, whose error may already be the
// cursor's problem.
func (s *Server) failPage(ctx context.Context, err error) error {
	var se huma.StatusError
	if errors.As(err, &se) {
		return se
	}
	return s.fail(ctx, err)
}

// body is a response with a JSON body.
type body[T any] struct {
	Body T
}

// reply wraps v as a response.
func reply[T any](v T) *body[T] { return &body[T]{Body: v} }

// errorsIsAny reports whether err matches any of targets.
func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
