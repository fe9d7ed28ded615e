// Package datadog is the "datadog" verification provider: a measurement
// is one query of Datadog's metrics query API (GET /api/v1/query, with
// the DD-API-KEY and DD-APPLICATION-KEY headers) over the window ending
// now. The result the metric's conditions read as `result`:
//
//	query   the query sent
//	from    start of the window, Unix seconds
//	to      end of the window, Unix seconds
//	value   the last non-null point of the first series, or null when
//	        the query returned no point
//	series  each series' metric, scope, expression and last points
//	        ([time ms, value]), capped
//
// so a stored measurement says what was measured. The site is the
// metric's provider.config.address (default DefaultAddress, the US1
// site); there is no process-wide default. Keys come only from the
// SecretResolver, per request. The one call goes through the shared
// outbound client rather than Datadog's official Go client, whose module
// is large for one GET and would bypass the address guard and the shared
// classification of answers; the tests check it against Datadog's
// published definition instead (testdata, from that client's repository).
//
// Invariants: Results are JSON-like and keep what was measured (query,
// window, values); bad config names `provider.config.<key>`; keys only
// through `SecretResolver`; a Datadog metric's site is its own
// `provider.config.address` (default US1, no process-wide setting)
package datadog

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/ports"
)

// Type is the policy.Provider.Type this verifier serves.
const Type = "datadog"

// Defaults of a metric's provider.config.
const (
	// DefaultAddress is the API root of the US1 site, for a metric whose
	// provider.config names no address.
	DefaultAddress   = "https://api.datadoghq.com"
	DefaultAPIKeyRef = "env:RECONCILER_SECRET_DATADOG_API_KEY"
	DefaultAppKeyRef = "env:RECONCILER_SECRET_DATADOG_APP_KEY"
	DefaultWindow    = 5 * time.Minute
)

// Caps on what a result keeps of the response.
const (
	maxSeries = 10
	maxPoints = 30
)

// Options configures a Verifier; zero fields take the defaults.
type Options struct {
	// APIKeyRef and AppKeyRef are secret references of the keys.
	APIKeyRef, AppKeyRef string
	// Window is how far back from now a query reads.
	Window time.Duration
	HTTP   outbound.Options
	Clock  ports.Clock
}

// Verifier is the datadog verification provider; goroutine-safe.
type Verifier struct {
	o       Options
	http    *outbound.Client
	secrets ports.SecretResolver
}

var _ ports.Verifier = (*Verifier)(nil)

// New returns a verifier reading keys through secrets.
func New(secrets ports.SecretResolver, o Options) *Verifier {
	if o.APIKeyRef == "" {
		o.APIKeyRef = DefaultAPIKeyRef
	}
	if o.AppKeyRef == "" {
		o.AppKeyRef = DefaultAppKeyRef
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Clock == nil {
		o.Clock = ports.SystemClock
	}
	o.HTTP.Adapter = Type
	return &Verifier{o: o, http: outbound.New(o.HTTP), secrets: secrets}
}

// Type returns "datadog".
func (v *Verifier) Type() string { return Type }

// config is one metric's validated provider config.
type config struct {
	query, address       string
	apiKeyRef, appKeyRef string
	window               time.Duration
}

// ValidateConfig checks a datadog provider.config; a refusal is a
// *release.FieldError naming provider.config.<key>. Keys: query
// (required), address (the site's API root, an http(s) URL without a
// path, such as https://api.datadoghq.eu; default DefaultAddress), window
// (Go duration; default 5m), apiKeyRef and appKeyRef (secret references;
// default the verifier's).
func ValidateConfig(cfg map[string]any) error {
	_, err := New(nil, Options{}).parse(cfg)
	return err
}

func (v *Verifier) parse(cfg map[string]any) (config, error) {
	r := &configmap.Reader{Prefix: "provider.config", Map: cfg}
	c := config{
		query:     r.Required("query"),
		address:   r.URL("address", DefaultAddress),
		window:    r.Duration("window", v.o.Window),
		apiKeyRef: r.SecretRef("apiKeyRef", v.o.APIKeyRef),
		appKeyRef: r.SecretRef("appKeyRef", v.o.AppKeyRef),
	}
	if r.Err == nil && c.window <= 0 {
		r.Fail("window", "must be positive")
	}
	if u, err := url.Parse(c.address); c.address != "" && err == nil && (u.Path != "" || u.RawQuery != "" || u.Fragment != "") {
		r.Fail("address", fmt.Sprintf("want the site's API root without a path, such as %q, got %q", "https://api.datadoghq.eu", c.address))
	}
	return c, r.Err
}

// response is the part of the query API's answer the verifier reads.
type response struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Series *[]struct {
		Metric     string       `json:"metric"`
		Scope      string       `json:"scope"`
		Expression string       `json:"expression"`
		Pointlist  [][]*float64 `json:"pointlist"`
	} `json:"series"`
}

// Measure runs the metric's query once.
func (v *Verifier) Measure(ctx context.Context, r ports.MeasureRequest) (any, error) {
	cfg, err := v.parse(r.Metric.Provider.Config)
	if err != nil {
		return nil, fmt.Errorf("%s: metric %q: %w", Type, r.Metric.Name, err)
	}
	apiKey, err := configmap.ResolveTo(ctx, v.secrets, "provider.config.apiKeyRef", cfg.apiKeyRef, cfg.address)
	if err != nil {
		return nil, fmt.Errorf("%s: metric %q: %w", Type, r.Metric.Name, err)
	}
	appKey, err := configmap.ResolveTo(ctx, v.secrets, "provider.config.appKeyRef", cfg.appKeyRef, cfg.address)
	if err != nil {
		return nil, fmt.Errorf("%s: metric %q: %w", Type, r.Metric.Name, err)
	}
	to := v.o.Clock.Now().Unix()
	from := to - int64(cfg.window/time.Second)
	q := url.Values{"from": {strconv.FormatInt(from, 10)}, "to": {strconv.FormatInt(to, 10)}, "query": {cfg.query}}
	var resp response
	_, err = v.http.DoJSON(ctx, outbound.Request{Call: "query metrics", Method: http.MethodGet, Idempotent: true,
		URL:    cfg.address + "/api/v1/query?" + q.Encode(),
		Header: http.Header{"Dd-Api-Key": {apiKey}, "Dd-Application-Key": {appKey}}}, &resp)
	if err != nil {
		return nil, err
	}
	if resp.Status != "ok" {
		return nil, v.http.Errorf("query metrics", "query %q: status %q: %s", cfg.query, resp.Status, resp.Error)
	}
	if resp.Series == nil {
		return nil, v.http.Errorf("query metrics", "%w: no series in the response", outbound.ErrMalformed)
	}
	result := map[string]any{"query": cfg.query, "from": float64(from), "to": float64(to), "value": nil}
	series := []any{}
	for i, s := range *resp.Series {
		var points []any
		var last any
		for _, p := range s.Pointlist {
			if len(p) != 2 || p[0] == nil {
				return nil, v.http.Errorf("query metrics", "%w: a point is not [time, value]", outbound.ErrMalformed)
			}
			var val any
			if p[1] != nil && !math.IsNaN(*p[1]) && !math.IsInf(*p[1], 0) {
				val = *p[1]
				last = val
			}
			points = append(points, []any{*p[0], val})
		}
		if i == 0 {
			result["value"] = last
		}
		if i < maxSeries {
			if len(points) > maxPoints {
				points = points[len(points)-maxPoints:]
			}
			if points == nil {
				points = []any{}
			}
			series = append(series, map[string]any{"metric": s.Metric, "scope": s.Scope, "expression": s.Expression, "points": points})
		}
	}
	result["series"] = series
	return result, nil
}
