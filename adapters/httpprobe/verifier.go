// Package httpprobe is the "http" verification provider: a measurement is
// one HTTP request to the metric's URL. Any response is a result (the
// metric's conditions judge it); only a failure to get one (refused
// connection, timeout, a body over the cap) is an error. The result the
// conditions read as `result`:
//
//	url      the URL requested
//	method   the method used
//	status   the response's status code
//	headers  the response's headers, lower-case names, first value each
//	body     the body decoded as JSON when it is JSON, else as text; a
//	         body over MaxStoredBody (4 KiB) is kept as its first 4 KiB of
//	         text followed by TruncatedMarker, never decoded
//
// so a stored measurement says what was measured; the request's own
// headers (which may carry credentials) are not kept, and a measurement
// (readable with the read scope) holds at most 4 KiB of any page. A probe is tried
// once: its answer, a 5xx too, is the measurement.
//
// Invariants: Results are JSON-like and keep what was measured (query,
// window, values); bad config names `provider.config.<key>`; keys only
// through `SecretResolver`; a Datadog metric's site is its own
// `provider.config.address` (default US1, no process-wide setting)
package httpprobe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/ports"
)

// Type is the policy.Provider.Type this verifier serves.
const Type = "http"

// Limits of a probe.
const (
	DefaultTimeout = 10 * time.Second
	MaxBody        = 1 << 20
	// MaxStoredBody is the most of a response body a measurement keeps.
	MaxStoredBody = 4 << 10
	maxHeaders    = 50
)

// TruncatedMarker ends a body cut at MaxStoredBody; the number of bytes
// the whole body had follows it.
const TruncatedMarker = "…[truncated; the body had "

// Verifier is the http verification provider; goroutine-safe.
type Verifier struct{ http *outbound.Client }

var _ ports.Verifier = (*Verifier)(nil)

// New returns a probe verifier; o's Attempts default to 1, its Timeout to
// DefaultTimeout and its MaxBody to MaxBody.
func New(o outbound.Options) *Verifier {
	o.Adapter = Type
	if o.Attempts <= 0 {
		o.Attempts = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxBody <= 0 {
		o.MaxBody = MaxBody
	}
	return &Verifier{http: outbound.New(o)}
}

// Type returns "http".
func (v *Verifier) Type() string { return Type }

type config struct {
	url, method, body string
	headers           map[string]string
}

var methods = map[string]bool{http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true}

// ValidateConfig checks an http provider.config; a refusal is a
// *release.FieldError naming provider.config.<key>. Keys: url (required),
// method (default GET), headers (object of strings), body (string).
func ValidateConfig(cfg map[string]any) error {
	_, err := parse(cfg)
	return err
}

func parse(cfg map[string]any) (config, error) {
	r := &configmap.Reader{Prefix: "provider.config", Map: cfg}
	c := config{url: r.URL("url", ""), method: strings.ToUpper(r.String("method", http.MethodGet)),
		headers: r.Strings("headers"), body: r.String("body", "")}
	if r.Err == nil && !methods[c.method] {
		r.Fail("method", fmt.Sprintf("want GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS, got %q", c.method))
	}
	return c, r.Err
}

// Measure sends the probe once.
func (v *Verifier) Measure(ctx context.Context, r ports.MeasureRequest) (any, error) {
	cfg, err := parse(r.Metric.Provider.Config)
	if err != nil {
		return nil, fmt.Errorf("%s: metric %q: %w", Type, r.Metric.Name, err)
	}
	h := http.Header{}
	for k, val := range cfg.headers {
		h.Set(k, val)
	}
	req := outbound.Request{Call: "probe", Method: cfg.method, URL: cfg.url, Header: h, Idempotent: true, AnyStatus: true}
	if cfg.body != "" {
		req.Body = []byte(cfg.body)
	}
	resp, err := v.http.Do(ctx, req)
	if err != nil {
		return nil, err
	}
	headers := map[string]any{}
	for k, vs := range resp.Header {
		if len(headers) < maxHeaders && len(vs) > 0 {
			headers[strings.ToLower(k)] = vs[0]
		}
	}
	body := storedBody(resp.Body)
	return map[string]any{"url": cfg.url, "method": cfg.method, "status": float64(resp.Status), "headers": headers, "body": body}, nil
}

// storedBody is what a measurement keeps of a response body b: b decoded
// as JSON when it is JSON, else as text, while it is at most MaxStoredBody
// bytes; else its first MaxStoredBody bytes (cut on a character boundary)
// and TruncatedMarker with b's size.
func storedBody(b []byte) any {
	if len(b) > MaxStoredBody {
		cut := MaxStoredBody
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		return strings.ToValidUTF8(string(b[:cut]), "\uFFFD") + TruncatedMarker + strconv.Itoa(len(b)) + " bytes]"
	}
	var decoded any
	if len(b) > 0 && json.Unmarshal(b, &decoded) == nil {
		return decoded
	}
	return string(b)
}
