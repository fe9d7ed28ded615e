package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// The exit statuses of every command.
const (
	exitOK           = 0
	exitUnauthorized = 5
)

// exitHelp documents the exit statuses in the root help and the README.
const exitHelp = `Exit status (every command):
  0  ok
  1  error (server or database unreachable, internal failure)
  2  bad input (a flag, an argument, a document; the message names the field)
  3  conflict (a stale --version, a held lock, an id that exists)
  4  not found
  5  unauthorized (no, unknown or revoked token, or a scope it lacks)
  6  database not migrated: run "reconciler migrate up"`

// exitStatus maps an error onto the exit status table; main exits with it.
func exitStatus(err error) int {
	var ec exitCoder
	switch {
	case err == nil:
		return exitOK
	case strings.HasPrefix(err.Error(), "unknown command"), strings.HasPrefix(err.Error(), "unknown flag"):
		return exitInvalid
	case errors.As(err, &ec):
		return ec.ExitCode()
	case errors.Is(err, client.ErrUnauthorized):
		return exitUnauthorized
	case errors.Is(err, release.ErrInvalid):
		return exitInvalid
	case errors.Is(err, ports.ErrConflict):
		return exitConflict
	case errors.Is(err, ports.ErrNotFound):
		return exitNotFound
	}
	return exitInternal
}

// remoteOpts select the API server a command talks to.
type remoteOpts struct {
	server string
	token  string
}

// bind adds --server and --token (RECONCILER_SERVER, RECONCILER_TOKEN).
func (r *remoteOpts) bind(fs *pflag.FlagSet) {
	fs.StringVar(&r.server, "server", "", "API server URL, e.g. http://127.0.0.1:8080 (env RECONCILER_SERVER); the command then goes through the API")
	fs.StringVar(&r.token, "token", "", "API bearer token (env RECONCILER_TOKEN)")
}

// remote returns the API client when --server is set (after the
// RECONCILER_* fallbacks), else nil.
func (r *remoteOpts) remote() (*client.Client, error) {
	if r.server == "" {
		return nil, nil
	}
	if r.token == "" {
		return nil, usagef("--server needs a token: set --token or RECONCILER_TOKEN (see `reconciler token create`)")
	}
	c, err := client.New(r.server, r.token)
	if err != nil {
		return nil, usageError{err}
	}
	return c, nil
}

// handlerTransport sends requests to an http.Handler in the process. The
// answer streams: its body is a pipe the handler writes into, so a stream
// (GET /api/v1/events) is read as it is written; closing the body (or
// ending the request's context) ends the handler's writes.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, body: pw, started: make(chan struct{})}
	go func() {
		defer func() {
			w.start(http.StatusOK)
			_ = pw.Close()
		}()
		t.h.ServeHTTP(w, r)
	}()
	select {
	case <-w.started:
	case <-r.Context().Done():
		_ = pr.Close()
		return nil, r.Context().Err()
	}
	return &http.Response{StatusCode: w.status, Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: w.sent, Body: pr, ContentLength: -1, Request: r}, nil
}

// pipeResponse is the http.ResponseWriter of handlerTransport: the status
// and headers are sent on the first WriteHeader or Write, the body through
// the pipe.
type pipeResponse struct {
	header, sent http.Header
	status       int
	body         *io.PipeWriter
	once         sync.Once
	started      chan struct{}
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(code int) { w.start(code) }

func (w *pipeResponse) Write(b []byte) (int, error) {
	w.start(http.StatusOK)
	return w.body.Write(b)
}

// Flush does nothing: what is written is read at once.
func (w *pipeResponse) Flush() {}

func (w *pipeResponse) start(code int) {
	w.once.Do(func() {
		w.status, w.sent = code, w.header.Clone()
		close(w.started)
	})
}

// apiClient returns the client a client-only command uses: the server of
// --server, or, with --dsn, the API served in this process over that
// database, acting as localPrincipal (offline and admin use). It returns a
// close function.
func (o *releaseOpts) apiClient(cmd *cobra.Command) (*client.Client, func(), error) {
	if err := o.check(cmd); err != nil {
		return nil, nil, err
	}
	if c, err := o.remote(); c != nil || err != nil {
		return c, func() {}, err
	}
	be, err := o.open(cmd, "set --dsn or RECONCILER_DSN")
	if err != nil {
		return nil, nil, err
	}
	changes := be.startChanges(defaultEventsKeep, defaultEventsRetention, ports.SystemClock, nil)
	rt := newReleaseRuntime(be.releases, be.workflows, be.catalog, be.queue, ports.SystemClock,
		slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	srv := api.New(api.Options{Chain: rt.chain, Flows: rt.flows, Catalog: catalog.New(be.catalog, be.catalogConfig()),
		Releases: be.releases, Workflows: be.workflows, Queue: be.queue, Tokens: be.tokens,
		Runs: &runs.Control{Store: be.runs, Queue: be.queue, Clock: ports.SystemClock}, Clock: ports.SystemClock,
		Insecure: true, InsecurePrincipal: localPrincipal(), Tx: be.tx, Audit: be.audit, AgentConfig: agentConfigValidator(),
		Pull: rt.pullService(be, ports.SystemClock), Changes: changes})
	c, err := client.New("http://in-process", "", client.WithHTTPClient(&http.Client{Transport: handlerTransport{srv.Handler()}}))
	if err != nil {
		be.close()
		return nil, nil, err
	}
	return c, func() { rt.close(); be.close() }, nil
}

// outputs lists the -o formats of reads.
const outputs = "table, json or yaml"

// checkOutput validates -o.
func checkOutput(o string) error {
	switch o {
	case "", "text", "table", "json", "yaml":
		return nil
	}
	return usagef("--output: want %s, got %q", outputs, o)
}

// structured prints v as JSON or YAML when -o asks for it and reports
// whether it did; otherwise the caller prints its table.
func structured(w io.Writer, output string, v any) (bool, error) {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return true, enc.Encode(v)
	case "yaml":
		b, err := json.Marshal(v)
		if err == nil {
			b, err = yaml.JSONToYAML(b)
		}
		if err != nil {
			return true, fmt.Errorf("encode yaml: %w", err)
		}
		_, err = w.Write(b)
		return true, err
	}
	return false, nil
}

// withRemote runs remote when --server is set, else local (the database
// path): the existing commands keep their --dsn behaviour and go through
// the API with --server.
func (o *releaseOpts) withRemote(cmd *cobra.Command, remote func(ctx context.Context, c *client.Client) error, local func() error) error {
	if err := o.check(cmd); err != nil {
		return err
	}
	c, err := o.remote()
	if err != nil {
		return err
	}
	if c == nil {
		return local()
	}
	return remote(cmd.Context(), c)
}
