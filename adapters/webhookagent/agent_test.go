package webhookagent

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/netguard"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

const secret = "hook-secret"

var testSecrets = configmap.Secrets{"env:RECONCILER_SECRET_HOOK": secret}

// receiver is a webhook receiver: it verifies each delivery, runs a job
// once per Idempotency-Key and answers with its own id for the run.
type receiver struct {
	mu     sync.Mutex
	faults []int
	answer string // body of a 2xx answer; default {"external_id": "run-<n>"}
	keys   map[string]string
	jobs   []Payload
	// processing are keys whose first delivery the receiver is still
	// processing: another delivery with the key gets 409, as the
	// Idempotency-Key HTTP header draft has it.
	processing map[string]bool
	srv        *httptest.Server
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{keys: map[string]string{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.faults) > 0 {
			code := r.faults[0]
			r.faults = r.faults[1:]
			w.WriteHeader(code)
			return
		}
		body, _ := io.ReadAll(req.Body)
		if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if err := Verify([]byte(secret), body, req.Header.Get(HeaderTimestamp), req.Header.Get(HeaderSignature), time.Now(), 0); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		key := req.Header.Get("Idempotency-Key")
		if r.processing[key] {
			http.Error(w, `{"title":"a request with this Idempotency-Key is being processed"}`, http.StatusConflict)
			return
		}
		id, seen := r.keys[key]
		if !seen {
			var p Payload
			if json.Unmarshal(body, &p) != nil || p.Job.ID != key {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			r.jobs = append(r.jobs, p)
			id = "run-" + strconv.Itoa(len(r.jobs))
			r.keys[key] = id
		}
		if r.answer != "" {
			_, _ = w.Write([]byte(r.answer))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"external_id": id})
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) config() map[string]any {
	return map[string]any{"url": r.srv.URL + "/jobs", "secretRef": "env:RECONCILER_SECRET_HOOK"}
}

func newAgent(t *testing.T) *Agent {
	a := New(testSecrets, nil, outbound.Options{Guard: netguard.Loopback, Backoff: time.Millisecond})
	t.Cleanup(a.Close)
	return a
}

func TestConformance(t *testing.T) {
	r := newReceiver(t)
	porttest.JobAgent(t, func(t *testing.T, _ ports.JobReporter) ports.JobAgent { return newAgent(t) },
		porttest.JobAgentOptions{Config: r.config(), Passive: true, Durable: true})
}

func TestDeliversTheSignedJob(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	d := porttest.JobAgentDispatch(Type, "job-1", r.config())
	res, err := newAgent(t).Dispatch(t.Context(), d)
	require.NoError(t, err)
	require.Equal(t, ports.JobDispatchResult{ExternalID: "run-1", Status: release.JobInProgress,
		Message: "delivered to " + r.srv.URL + "/jobs; the receiver reports through the API"}, res)
	require.Len(t, r.jobs, 1)
	got := r.jobs[0]
	require.Equal(t, d.Job.ID, got.Job.ID)
	require.Equal(t, d.Version.Tag, got.Version.Tag)
	require.Equal(t, d.Resource.Identifier, got.Resource.Identifier)
	require.Equal(t, "agent-1", got.Agent.ID)
}

func TestRedeliveryAfterACrashCarriesTheSameKey(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	r1, err := newAgent(t).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", r.config()))
	require.NoError(t, err)
	r2, err := newAgent(t).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", r.config()))
	require.NoError(t, err)
	require.Equal(t, r1, r2)
	require.Len(t, r.jobs, 1, "the receiver ran the job once")
}

// TestRedeliveryWhileTheFirstIsProcessed: a receiver still processing
// the first delivery answers the redelivery (after a crash) 409; the
// job is not ended invalid but delivered again, and taken once.
func TestRedeliveryWhileTheFirstIsProcessed(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	first, err := newAgent(t).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", r.config()))
	require.NoError(t, err)
	r.mu.Lock()
	r.processing = map[string]bool{"job-1": true}
	r.mu.Unlock()

	_, err = newAgent(t).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", r.config()))
	require.ErrorContains(t, err, "status 409", "an error, retried with the work item: not the end of the job")
	require.ErrorContains(t, err, "Idempotency-Key")

	r.mu.Lock()
	r.processing = nil
	r.mu.Unlock()
	again, err := newAgent(t).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", r.config()))
	require.NoError(t, err)
	require.Equal(t, first, again)
	require.Len(t, r.jobs, 1, "the receiver ran the job once")
}

// TestRedeliveryBodyIsTheSame: a job redelivered after its lease and
// message changed has the same body, so an idempotent receiver never sees
// its key reused with another payload.
func TestRedeliveryBodyIsTheSame(t *testing.T) {
	t.Parallel()
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, b)
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	cfg := map[string]any{"url": srv.URL, "secretRef": "env:RECONCILER_SECRET_HOOK"}
	d := porttest.JobAgentDispatch(Type, "job-1", cfg)
	_, err := newAgent(t).Dispatch(t.Context(), d)
	require.NoError(t, err)
	d.Job.LeaseUntil, d.Job.Message, d.Job.Status = d.Job.CreatedAt.Add(time.Minute), "dispatch failed; retried", release.JobInProgress
	_, err = newAgent(t).Dispatch(t.Context(), d)
	require.NoError(t, err)
	require.Len(t, bodies, 2)
	require.JSONEq(t, string(bodies[0]), string(bodies[1]))
}

func TestRetriesAndAnswers(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	r.faults = []int{http.StatusServiceUnavailable, http.StatusTooManyRequests}
	_, err := newAgent(t).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", r.config()))
	require.NoError(t, err)

	r = newReceiver(t)
	r.answer = "accepted, thanks"
	res, err := newAgent(t).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-2", r.config()))
	require.NoError(t, err)
	require.Equal(t, "job-2", res.ExternalID, "an answer without an external id: the job id")

	r = newReceiver(t)
	r.faults = []int{500, 500, 500, 500}
	_, err = newAgent(t).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-3", r.config()))
	require.ErrorContains(t, err, "webhook: deliver job: status 500")

	r = newReceiver(t)
	cfg := r.config()
	cfg["secretRef"] = "env:RECONCILER_SECRET_OTHER"
	bad := configmap.Secrets{"env:RECONCILER_SECRET_OTHER": "wrong"}
	res, err = New(bad, nil, outbound.Options{Guard: netguard.Loopback}).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-4", cfg))
	require.NoError(t, err)
	require.Equal(t, release.JobInvalidJobAgent, res.Status, "the receiver refused the signature: 401")
	require.Contains(t, res.Message, "status 401")

	for field, c := range map[string]map[string]any{
		"job_agent_config.url":       {"secretRef": "env:RECONCILER_SECRET_HOOK"},
		"job_agent_config.secretRef": {"url": "http://x", "secretRef": "hunter2"},
	} {
		require.ErrorContains(t, ValidateConfig(c), field)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"job":{"id":"j"}}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := Sign([]byte(secret), ts, body)
	require.NoError(t, Verify([]byte(secret), body, ts, sig, now.Add(time.Minute), 0))
	require.ErrorIs(t, Verify([]byte(secret), body, ts, sig, now.Add(6*time.Minute), 0), ErrStale)
	require.ErrorIs(t, Verify([]byte(secret), body, ts, sig, now.Add(-6*time.Minute), 0), ErrStale)
	require.ErrorIs(t, Verify([]byte(secret), body, "soon", sig, now, 0), ErrStale)
	require.ErrorIs(t, Verify([]byte(secret), append(body, ' '), ts, sig, now, 0), ErrBadSignature)
	require.ErrorIs(t, Verify([]byte("other"), body, ts, sig, now, 0), ErrBadSignature)
	later := strconv.FormatInt(now.Unix()+1, 10)
	require.ErrorIs(t, Verify([]byte(secret), body, later, sig, now, 0), ErrBadSignature, "the timestamp is signed too")
	require.ErrorIs(t, Verify(nil, body, ts, Sign(nil, ts, body), now, 0), ErrBadSignature)
}

// TestARefusedAddressIsNoPortOracle: finding 1 of issue 28 — a webhook
// agent pointed at any host:port serve reaches told, through its job's
// message (readable with read), whether the port was open (404, delivered,
// pending). Behind the guard an open port, a closed one and a secret's
// destination read the same: the job ends invalidJobAgent saying only that
// the guard refused the address, with no request made.
func TestARefusedAddressIsNoPortOracle(t *testing.T) {
	t.Parallel()
	var hits int
	var mu sync.Mutex
	open := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(open.Close)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	a := New(testSecrets, nil, outbound.Options{Guard: netguard.MustNew(), Backoff: time.Millisecond})
	t.Cleanup(a.Close)
	// message is the refusal of a job to base (http://127.0.0.1:PORT), its
	// port written PORT: the port is the job's own input, and a random one
	// may well contain "404".
	message := func(id, base string) string {
		res, err := a.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, id, map[string]any{"url": base + "/jobs", "secretRef": "env:RECONCILER_SECRET_HOOK"}))
		require.NoError(t, err, "a refusal is no transient error to retry")
		require.Equal(t, release.JobInvalidJobAgent, res.Status)
		require.Contains(t, res.Message, outbound.GuardRefusal)
		msg := strings.ReplaceAll(res.Message, strings.TrimPrefix(base, "http://127.0.0.1:"), "PORT")
		for _, leak := range []string{"404", "Not Found", "connection refused", "delivered", "status"} {
			require.NotContains(t, msg, leak)
		}
		return msg
	}
	require.Equal(t, message("job-open", open.URL), message("job-closed", closedURL))
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, hits, "no request reached the open port")
}
