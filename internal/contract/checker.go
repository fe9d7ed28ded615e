package contract

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// OffContract is the response header a fake sets on an answer it breaks
// on purpose (a malformed body a test wants): the checker does not
// validate that response and drops the header.
const OffContract = "X-Fake-Off-Contract"

// Checker validates HTTP exchanges against one API definition.
type Checker struct {
	router routers.Router
	fill   bool
	allow  map[int]bool
	waive  map[string][]string
	mu     sync.Mutex
	errs   []string
}

// FillResponses makes Wrap complete each JSON answer with Fill before it
// is checked and sent: a fake then states only the fields its tests read,
// and the client under test still gets the vendor's whole shape.
func (c *Checker) FillResponses() *Checker {
	c.fill = true
	return c
}

// Load reads the definition at path: an OpenAPI 3 document, or a Swagger
// 2.0 one (converted to OpenAPI 3). Its servers are dropped, so paths
// match on any host (the fakes' httptest addresses).
func Load(path string) (*Checker, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("contract: %w", err)
	}
	return Parse(path, b)
}

// Parse reads the definition b (named path in errors), as Load does.
func Parse(path string, b []byte) (*Checker, error) {
	var probe struct {
		Swagger string `json:"swagger"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("contract: %s: %w", path, err)
	}
	var doc *openapi3.T
	var err error
	if probe.Swagger != "" {
		var v2 openapi2.T
		if err := json.Unmarshal(b, &v2); err != nil {
			return nil, fmt.Errorf("contract: %s: swagger: %w", path, err)
		}
		if doc, err = openapi2conv.ToV3(&v2); err != nil {
			return nil, fmt.Errorf("contract: %s: convert swagger: %w", path, err)
		}
	} else {
		loader := openapi3.NewLoader()
		if doc, err = loader.LoadFromData(b); err != nil {
			return nil, fmt.Errorf("contract: %s: %w", path, err)
		}
	}
	doc.Servers = nil
	r, err := legacy.NewRouter(doc, openapi3.DisableExamplesValidation(), openapi3.DisableSchemaFormatValidation())
	if err != nil {
		return nil, fmt.Errorf("contract: %s: router: %w", path, err)
	}
	return &Checker{router: r}, nil
}

// options skip the definitions' authentication schemes (the fakes check
// credentials themselves) and take unknown string formats.
var options = &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}

// Wrap returns h behind the checker: each request is validated and h's
// response after it wrote it; a violation is recorded (Violations) and
// answered as h answered. The exchanges are checked only where the
// definition has the operation: a request to a path it lacks is a
// violation too.
func (c *Checker) Wrap(h http.Handler) http.Handler {
	return Intercept(h, func(r *http.Request, body []byte, rec *httptest.ResponseRecorder) {
		route, params, err := c.router.FindRoute(r)
		if err != nil {
			c.fail("%s %s: not in the definition: %v", r.Method, r.URL.Path, err)
			return
		}
		in := &openapi3filter.RequestValidationInput{Request: r.Clone(context.Background()), PathParams: params, Route: route, Options: options}
		in.Request.Body = io.NopCloser(bytes.NewReader(body))
		if names := c.waive[route.Path]; len(names) > 0 {
			q := in.Request.URL.Query()
			for _, n := range names {
				q.Del(n)
			}
			in.Request.URL.RawQuery = q.Encode()
		}
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			c.fail("request %s %s: %v", r.Method, r.URL.Path, err)
		}
		if rec.Header().Get(OffContract) != "" {
			return
		}
		if c.fill {
			c.complete(route.Operation, rec)
		}
		if !c.allow[rec.Code] {
			out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.Code, Header: rec.Header(), Options: options}
			out.SetBodyBytes(rec.Body.Bytes())
			if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
				c.fail("response %d to %s %s: %v", rec.Code, r.Method, r.URL.Path, err)
			}
		}
	})
}

// Intercept returns h with each exchange handed to check: the request,
// its body (h reads it too) and h's answer, recorded; check may change the
// answer. The answer then goes to the client as recorded, without the
// OffContract header. It is what Checker.Wrap and the checks of a vendor's
// own client library (a fake checked against go-tfe) share.
func Intercept(h http.Handler, check func(r *http.Request, body []byte, rec *httptest.ResponseRecorder)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		r.Body = io.NopCloser(bytes.NewReader(body))
		check(r, body, rec)
		rec.Header().Del(OffContract)
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// AllowStatus makes Wrap take answers with these statuses unchecked: the
// ones a vendor gives on every route (bad credentials, rate limits)
// although its definition lists them on few.
func (c *Checker) AllowStatus(codes ...int) *Checker {
	if c.allow == nil {
		c.allow = map[int]bool{}
	}
	for _, code := range codes {
		c.allow[code] = true
	}
	return c
}

// WaiveQuery leaves the query parameters names of the definition's path
// out of the request check: for a parameter the definition types wrongly
// (GitHub's created is typed date-time but takes search syntax), which
// the fake then checks itself.
func (c *Checker) WaiveQuery(path string, names ...string) *Checker {
	if c.waive == nil {
		c.waive = map[string][]string{}
	}
	c.waive[path] = append(c.waive[path], names...)
	return c
}

// complete fills rec's JSON body with the schema the operation documents
// for its status (Fill).
func (c *Checker) complete(op *openapi3.Operation, rec *httptest.ResponseRecorder) {
	if op == nil || op.Responses == nil || !strings.Contains(rec.Header().Get("Content-Type"), "json") {
		return
	}
	resp := op.Responses.Status(rec.Code)
	if resp == nil {
		resp = op.Responses.Default()
	}
	if resp == nil || resp.Value == nil {
		return
	}
	mt := resp.Value.Content.Get("application/json")
	if mt == nil || mt.Schema == nil {
		return
	}
	var v any
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		return // the checker reports it
	}
	b, err := json.Marshal(Fill(mt.Schema.Value, v))
	if err != nil {
		return
	}
	rec.Body.Reset()
	rec.Body.Write(b)
	rec.Header().Del("Content-Length")
}

func (c *Checker) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	msg, _, _ := strings.Cut(fmt.Sprintf(format, args...), "\n") // the schema and value dumps follow

	c.errs = append(c.errs, msg)
}

// Violations returns the violations recorded so far.
func (c *Checker) Violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

// TB is the part of testing.TB the checker uses.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Cleanup(func())
}

// FailOnViolations makes t fail, when it ends, with every violation the
// checker recorded.
func (c *Checker) FailOnViolations(t TB) {
	t.Cleanup(func() {
		for _, v := range c.Violations() {
			t.Errorf("contract: %s", v)
		}
	})
}
