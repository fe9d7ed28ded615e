// Package prometheus is the "prometheus" verification provider: a
// measurement is one instant query of Prometheus's HTTP API
// (GET /api/v1/query?query=&time=). The result the metric's conditions
// read as `result`:
//
//	query       the query sent
//	time        the evaluation time, Unix seconds
//	resultType  "vector" or "scalar"
//	value       the first sample's value (null when there is none or it
//	            is NaN or infinite)
//	values      every sample's value, in the response's order
//	samples     each sample's labels and value ({metric, value}), capped;
//	            a native histogram sample has value null and histogram
//	            {count, sum} instead
//
// so a stored measurement says what was measured. A range query result
// (matrix) or a string is refused: a metric wants a number.
//
// The query goes through the shared outbound client (address guard, one
// classification of answers, capped bodies), not client_golang's api/v1
// client, which has its own HTTP handling; the answers it reads are
// checked against ones captured from a real Prometheus (testdata).
//
// Invariants: Results are JSON-like and keep what was measured (query,
// window, values); bad config names `provider.config.<key>`; keys only
// through `SecretResolver`; a Datadog metric's site is its own
// `provider.config.address` (default US1, no process-wide setting)
package prometheus

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/ports"
)

// Type is the policy.Provider.Type this verifier serves.
const Type = "prometheus"

// maxSamples caps the samples a result keeps.
const maxSamples = 50

// Options configures a Verifier.
type Options struct {
	// Address is the server's URL when a metric names none
	// (provider.config.address); empty: every metric must name one.
	Address string
	HTTP    outbound.Options
	Clock   ports.Clock
}

// Verifier is the prometheus verification provider; goroutine-safe.
type Verifier struct {
	o       Options
	http    *outbound.Client
	secrets ports.SecretResolver
}

var _ ports.Verifier = (*Verifier)(nil)

// New returns a verifier; secrets reads bearer tokens (may be nil when no
// metric names a tokenRef).
func New(secrets ports.SecretResolver, o Options) *Verifier {
	if o.Clock == nil {
		o.Clock = ports.SystemClock
	}
	o.HTTP.Adapter = Type
	return &Verifier{o: o, http: outbound.New(o.HTTP), secrets: secrets}
}

// Type returns "prometheus".
func (v *Verifier) Type() string { return Type }

type config struct{ address, query, tokenRef, username, passwordRef, tenant string }

// ValidateConfig checks a prometheus provider.config; a refusal is a
// *release.FieldError naming provider.config.<key>. Keys: address (the
// server's URL, required unless the verifier has a default), query
// (PromQL, required), tokenRef (secret reference of a bearer token,
// optional), username and passwordRef (HTTP basic authentication, both or
// neither; not with tokenRef) and tenant (sent as X-Scope-OrgID, the
// tenant header of Cortex, Mimir and Thanos).
func ValidateConfig(cfg map[string]any) error {
	_, err := New(nil, Options{}).parse(cfg)
	return err
}

func (v *Verifier) parse(cfg map[string]any) (config, error) {
	r := &configmap.Reader{Prefix: "provider.config", Map: cfg}
	c := config{address: r.URL("address", v.o.Address), query: r.Required("query")}
	if _, ok := cfg["tokenRef"]; ok {
		c.tokenRef = r.SecretRef("tokenRef", "")
	}
	c.username = r.String("username", "")
	if _, ok := cfg["passwordRef"]; ok {
		c.passwordRef = r.SecretRef("passwordRef", "")
	}
	c.tenant = r.String("tenant", "")
	switch {
	case c.tenant != "" && !tenantID.MatchString(c.tenant):
		r.Fail("tenant", "want 1 to 150 of A-Z a-z 0-9 ! - _ . * ' ( ) and | between tenants")
	case strings.ContainsAny(c.username, ":") || strings.ContainsFunc(c.username, unicode.IsControl):
		r.Fail("username", "a basic-auth user name has no ':' and no control characters")
	case (c.username == "") != (c.passwordRef == ""):
		r.Fail("passwordRef", "username and passwordRef go together (HTTP basic authentication)")
	case c.username != "" && c.tokenRef != "":
		r.Fail("tokenRef", "a bearer token and basic authentication exclude each other")
	}
	return c, r.Err
}

// response is the query API's envelope.
type response struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      *struct {
		ResultType string `json:"resultType"`
		Result     any    `json:"result"`
	} `json:"data"`
}

// Measure runs the metric's query once, at now.
func (v *Verifier) Measure(ctx context.Context, r ports.MeasureRequest) (any, error) {
	cfg, err := v.parse(r.Metric.Provider.Config)
	if err != nil {
		return nil, fmt.Errorf("%s: metric %q: %w", Type, r.Metric.Name, err)
	}
	h := http.Header{}
	if cfg.tokenRef != "" {
		token, err := configmap.ResolveTo(ctx, v.secrets, "provider.config.tokenRef", cfg.tokenRef, cfg.address)
		if err != nil {
			return nil, fmt.Errorf("%s: metric %q: %w", Type, r.Metric.Name, err)
		}
		h.Set("Authorization", "Bearer "+token)
	}
	if cfg.username != "" {
		password, err := configmap.ResolveTo(ctx, v.secrets, "provider.config.passwordRef", cfg.passwordRef, cfg.address)
		if err != nil {
			return nil, fmt.Errorf("%s: metric %q: %w", Type, r.Metric.Name, err)
		}
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cfg.username+":"+password)))
	}
	if cfg.tenant != "" {
		h.Set("X-Scope-OrgID", cfg.tenant)
	}
	now := float64(v.o.Clock.Now().UnixMilli()) / 1000
	q := url.Values{"query": {cfg.query}, "time": {strconv.FormatFloat(now, 'f', 3, 64)}}
	call := "instant query"
	resp, err := v.http.Do(ctx, outbound.Request{Call: call, Method: http.MethodGet, URL: cfg.address + "/api/v1/query?" + q.Encode(),
		Header: h, Idempotent: true})
	if err != nil {
		return nil, err
	}
	var body response
	// Prometheus answers errors with a JSON envelope too (400, 422, 503).
	if err := v.http.Decode(call, resp, &body); err != nil {
		return nil, err
	}
	if body.Status != "success" || resp.Status != http.StatusOK {
		return nil, &outbound.Error{Adapter: Type, Call: call, Status: resp.Status,
			Err: fmt.Errorf("query %q: %s: %s", cfg.query, body.ErrorType, body.Error)}
	}
	if body.Data == nil {
		return nil, v.http.Errorf(call, "%w: no data", outbound.ErrMalformed)
	}
	result := map[string]any{"query": cfg.query, "time": now, "resultType": body.Data.ResultType, "value": nil}
	values, samples := []any{}, []any{}
	switch body.Data.ResultType {
	case "vector":
		list, ok := body.Data.Result.([]any)
		if !ok {
			return nil, v.http.Errorf(call, "%w: a vector result is not a list", outbound.ErrMalformed)
		}
		for _, e := range list {
			s, ok := e.(map[string]any)
			if !ok {
				return nil, v.http.Errorf(call, "%w: a sample is not an object", outbound.ErrMalformed)
			}
			metric, _ := s["metric"].(map[string]any)
			if metric == nil {
				metric = map[string]any{}
			}
			sample := map[string]any{"metric": metric, "value": nil}
			if h, ok := s["histogram"]; ok {
				hist, err := histogramSample(h)
				if err != nil {
					return nil, v.http.Errorf(call, "%w: %v", outbound.ErrMalformed, err)
				}
				sample["histogram"] = hist
			} else {
				val, err := sampleValue(s["value"])
				if err != nil {
					return nil, v.http.Errorf(call, "%w: %v", outbound.ErrMalformed, err)
				}
				sample["value"] = val
			}
			values = append(values, sample["value"])
			if len(samples) < maxSamples {
				samples = append(samples, sample)
			}
		}
	case "scalar":
		val, err := sampleValue(body.Data.Result)
		if err != nil {
			return nil, v.http.Errorf(call, "%w: %v", outbound.ErrMalformed, err)
		}
		values = append(values, val)
	default:
		return nil, v.http.Errorf(call, "query %q returned a %s; a metric wants an instant vector or a scalar", cfg.query, body.Data.ResultType)
	}
	if len(values) > 0 {
		result["value"] = values[0]
	}
	result["values"] = values
	result["samples"] = samples
	return result, nil
}

// tenantID is an X-Scope-OrgID value: Mimir's tenant id characters, "|"
// between the tenants of a federated query.
var tenantID = regexp.MustCompile(`^[A-Za-z0-9!._*'()|-]{1,150}$`)

// histogramSample reads a native histogram sample, [time, {"count":
// "N", "sum": "S", "buckets": [...]}], as {count, sum} (NaN and infinite
// sums are null); the buckets are not kept.
func histogramSample(v any) (any, error) {
	pair, ok := v.([]any)
	if !ok || len(pair) != 2 {
		return nil, fmt.Errorf("a histogram sample is not [time, {count, sum, buckets}]")
	}
	h, ok := pair[1].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("a histogram sample's histogram is not an object")
	}
	out := map[string]any{}
	for _, k := range []string{"count", "sum"} {
		val, err := sampleValue([]any{pair[0], h[k]})
		if err != nil {
			return nil, fmt.Errorf("histogram %s: %w", k, err)
		}
		out[k] = val
	}
	return out, nil
}

// sampleValue reads a [time, "value"] pair; NaN and infinities are null.
func sampleValue(v any) (any, error) {
	pair, ok := v.([]any)
	if !ok || len(pair) != 2 {
		return nil, fmt.Errorf("a sample value is not [time, \"value\"]")
	}
	s, ok := pair[1].(string)
	if !ok {
		return nil, fmt.Errorf("a sample value is not a string")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("sample value %q is not a number", s)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, nil
	}
	return f, nil
}
