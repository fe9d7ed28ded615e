// Package webhookagent is the "webhook" push job agent: Dispatch POSTs
// the job, HMAC-signed, to the configured URL, and the receiver runs it
// and reports its progress back through reconciler's API (by job id).
// The agent itself reports nothing.
//
// Every delivery carries:
//
//	Content-Type            application/json
//	Idempotency-Key         the job id: a delivery retried after a crash
//	                        or a lost response carries the same key, and
//	                        the receiver must run the job once per key
//	X-Reconciler-Timestamp  Unix seconds when it was signed
//	X-Reconciler-Signature  "sha256=" and the hex HMAC-SHA256, under the
//	                        shared secret, of the timestamp, ".", and the
//	                        body
//
// Receivers check deliveries with Verify, which refuses a bad signature
// and a timestamp outside the replay window. The secret comes only from
// the SecretResolver (secretRef).
//
// Invariants: Dispatch finds the run it already started by the job's
// correlation key before starting one; their followers hold a lease on each
// job (`--lock`, renewed every third of it), and a job whose lease ran out
// (its process died) is resumed by whichever `serve` claims it
// (`JobResumer`): followed by its recorded external id, never started again,
// or by the key when none was recorded (passes `porttest.JobAgent`'s resume
// cases: a new agent, one external run, one outcome); bad config or an
// unreadable credential ends the job `invalidJobAgent` naming the field;
// credentials only through `SecretResolver`, per request; reports only along
// `JobEdges`, one terminal
package webhookagent

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/jobfollow"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Type is the release.JobAgent.Type this agent serves.
const Type = release.WebhookAgentType

// Header names of a delivery.
const (
	HeaderTimestamp = "X-Reconciler-Timestamp"
	HeaderSignature = "X-Reconciler-Signature"
)

// DefaultWindow is the replay window Verify allows by default.
const DefaultWindow = 5 * time.Minute

// Agent is the webhook push agent; goroutine-safe.
type Agent struct {
	http    *outbound.Client
	secrets ports.SecretResolver
	track   *jobfollow.Tracker
	clock   ports.Clock
}

var _ ports.JobAgent = (*Agent)(nil)

// New returns an agent reading the signing secret through secrets.
func New(secrets ports.SecretResolver, clock ports.Clock, o outbound.Options) *Agent {
	o.Adapter = Type
	if clock == nil {
		clock = ports.SystemClock
	}
	return &Agent{http: outbound.New(o), secrets: secrets, clock: clock,
		track: jobfollow.New(jobfollow.Options{Adapter: Type, Reporter: ports.JobReporterFunc(func(context.Context, ports.JobReport) error { return nil })})}
}

// Type returns "webhook".
func (a *Agent) Type() string { return Type }

// Close refuses further dispatches.
func (a *Agent) Close() { a.track.Close() }

type config struct{ url, secretRef string }

// ValidateConfig checks a webhook job_agent_config; a refusal is a
// *release.FieldError naming job_agent_config.<key>. Keys: url (where the
// job is POSTed, required), secretRef (secret reference of the HMAC key,
// required).
func ValidateConfig(cfg map[string]any) error {
	_, err := parseConfig(cfg)
	return err
}

func parseConfig(cfg map[string]any) (config, error) {
	r := &configmap.Reader{Prefix: "job_agent_config", Map: cfg}
	c := config{url: r.URL("url", ""), secretRef: r.SecretRef("secretRef", "")}
	return c, r.Err
}

// Payload is the body of a delivery. It is the same for every delivery of
// a job: the job's fields that change while it waits for its dispatch
// (lease_until, message, status, started_at) are left out, so a receiver
// that keys idempotency on Idempotency-Key and the body (as the
// Idempotency-Key HTTP header draft does) sees a redelivery as the same
// request, never a key reused with another payload (its 422).
type Payload struct {
	Job         release.Job               `json:"job"`
	Agent       payloadAgent              `json:"agent"`
	Release     release.Release           `json:"release"`
	Version     release.DeploymentVersion `json:"version"`
	Deployment  release.Deployment        `json:"deployment"`
	Environment release.Environment       `json:"environment"`
	Resource    release.Resource          `json:"resource"`
}

// stableJob is job without the fields that change between deliveries.
func stableJob(job release.Job) release.Job {
	job.LeaseUntil, job.Message, job.Status, job.StartedAt = time.Time{}, "", "", time.Time{}
	return job
}

// payloadAgent names the agent record without its config.
type payloadAgent struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// Sign returns the X-Reconciler-Signature of body signed at ts.
func Sign(secret []byte, ts string, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Errors of Verify.
var (
	ErrBadSignature = errors.New("bad signature")
	ErrStale        = errors.New("timestamp outside the replay window")
)

// Verify checks a delivery's signature and that its timestamp lies within
// window of now (DefaultWindow when window is 0); it compares in constant
// time.
func Verify(secret, body []byte, timestamp, signature string, now time.Time, window time.Duration) error {
	if window <= 0 {
		window = DefaultWindow
	}
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s is not Unix seconds", ErrStale, HeaderTimestamp)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > window || d < -window {
		return ErrStale
	}
	want := Sign(secret, timestamp, body)
	if len(secret) == 0 || !hmac.Equal([]byte(strings.ToLower(signature)), []byte(want)) {
		return ErrBadSignature
	}
	return nil
}

// Dispatch delivers the job once per job id in this process (a retry
// after a crash delivers again with the same Idempotency-Key). A 2xx
// answer accepts it (status inProgress; the external id is the answer's
// JSON "external_id", or the job id); 409 is the receiver still
// processing an earlier delivery of the job (the Idempotency-Key in use,
// as after a crash): an error, delivered again later, never the end of
// the job; another 4xx ends the job invalidJobAgent; a 5xx or no answer
// is an error, retried with the work item.
func (a *Agent) Dispatch(ctx context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	return a.track.Dispatch(ctx, d, func(ctx context.Context) (jobfollow.Started, error) {
		invalid := func(err error) (jobfollow.Started, error) {
			return jobfollow.Started{Result: ports.JobDispatchResult{Status: release.JobInvalidJobAgent, Message: Type + ": " + err.Error()}}, nil
		}
		cfg, err := parseConfig(d.Job.JobAgentConfig)
		var secret string
		if err == nil {
			secret, err = configmap.ResolveTo(ctx, a.secrets, "job_agent_config.secretRef", cfg.secretRef, cfg.url)
		}
		if err != nil {
			return invalid(err)
		}
		body, err := json.Marshal(Payload{Job: stableJob(d.Job), Agent: payloadAgent{ID: d.Agent.ID, Name: d.Agent.Name, Type: d.Agent.Type},
			Release: d.Release, Version: d.Version, Deployment: d.Deployment, Environment: d.Environment, Resource: d.Resource})
		if err != nil {
			return jobfollow.Started{}, fmt.Errorf("%s: encode job %s: %w", Type, d.Job.ID, err)
		}
		ts := strconv.FormatInt(a.clock.Now().Unix(), 10)
		h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {d.Job.ID},
			HeaderTimestamp: {ts}, HeaderSignature: {Sign([]byte(secret), ts, body)}}
		resp, err := a.http.Do(ctx, outbound.Request{Call: "deliver job", Method: http.MethodPost, URL: cfg.url, Header: h, Body: body, Idempotent: true})
		if outbound.IsRefusal(err) { // the outbound guard's: the same whether the port is open or not
			return invalid(errors.New(outbound.Message(err)))
		}
		if err != nil {
			return jobfollow.Started{}, err
		}
		switch {
		case resp.Status/100 == 2:
		case resp.Status == http.StatusConflict:
			return jobfollow.Started{}, &outbound.Error{Adapter: Type, Call: "deliver job", Status: resp.Status,
				Err: errors.New("the receiver is still processing an earlier delivery of this job (its Idempotency-Key is in use); delivered again later")}
		case resp.Status/100 == 4:
			return invalid(fmt.Errorf("the receiver refused the job: status %d", resp.Status))
		default:
			return jobfollow.Started{}, &outbound.Error{Adapter: Type, Call: "deliver job", Status: resp.Status}
		}
		ext := d.Job.ID
		var answer struct {
			ExternalID string `json:"external_id"`
		}
		if json.Unmarshal(resp.Body, &answer) == nil && answer.ExternalID != "" {
			ext = answer.ExternalID
		}
		return jobfollow.Started{Result: ports.JobDispatchResult{ExternalID: ext, Status: release.JobInProgress,
			Message: "delivered to " + cfg.url + "; the receiver reports through the API"}}, nil
	})
}
