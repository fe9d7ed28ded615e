package outbound

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/internal/netguard"
	"github.com/reconcilerhq/reconciler/internal/tracing"

	"github.com/reconcilerhq/reconciler/ports"
)

// Defaults of Options.
const (
	DefaultTimeout       = 30 * time.Second
	DefaultAttempts      = 4
	DefaultBackoff       = 500 * time.Millisecond
	DefaultMaxBackoff    = 30 * time.Second
	DefaultMaxRetryAfter = time.Minute
	DefaultMaxBody       = 4 << 20
	DefaultPerHost       = 8
)

// Options configures a Client; zero fields take the defaults above.
type Options struct {
	// Adapter names the adapter in every error ("github-actions").
	Adapter string
	// Timeout bounds one attempt, response body included.
	Timeout time.Duration
	// Attempts is how many times a request is tried in all (at least 1).
	Attempts int
	// Backoff is the wait before the first retry, doubled before each
	// further one up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// MaxRetryAfter caps the wait a Retry-After header asks for.
	MaxRetryAfter time.Duration
	// MaxBody caps the response body read, in bytes; a larger body is an
	// error.
	MaxBody int64
	// PerHost caps the requests in flight to one host.
	PerHost int
	// Transport sends the requests; nil means Guard's transport.
	Transport http.RoundTripper
	// Guard decides which addresses the requests may reach when Transport
	// is nil; nil refuses loopback, private, link-local and the other
	// addresses netguard names, so a user-chosen URL cannot reach the
	// daemon's own network. serve passes --outbound-allow; tests against a
	// server on this machine pass netguard.Loopback.
	Guard *netguard.Guard
}

// Client sends an adapter's requests. It is goroutine-safe.
type Client struct {
	o     Options
	http  *http.Client
	mu    sync.Mutex
	hosts map[string]chan struct{} // per-host semaphores
	// pause waits d between attempts (a timer; tests record the waits).
	pause func(ctx context.Context, d time.Duration) error
}

// New returns a client with o's settings.
func New(o Options) *Client {
	if o.Adapter == "" {
		o.Adapter = "outbound"
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultAttempts
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.MaxRetryAfter <= 0 {
		o.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.PerHost <= 0 {
		o.PerHost = DefaultPerHost
	}
	t := o.Transport
	if t == nil {
		t = o.Guard.Transport()
	}
	t = tracing.Transport(t) // a span per call, and its traceparent header
	return &Client{o: o, http: &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // a redirect is an answer, not followed with our credentials
	}}, hosts: map[string]chan struct{}{}, pause: ports.Sleep}
}

// Adapter is the adapter name the client puts in its errors.
func (c *Client) Adapter() string { return c.o.Adapter }

// Request is one call.
type Request struct {
	// Call names the call in errors ("dispatch workflow").
	Call   string
	Method string
	URL    string
	Header http.Header
	// Body is sent as is; JSON sets it from a value.
	Body []byte
	// Idempotent requests are retried on 429, 5xx and transport errors;
	// others on 429 only.
	Idempotent bool
	// AnyStatus returns every response as it came, retrying none for its
	// status (a probe whose answer is the measurement).
	AnyStatus bool
	// Transient lists the 4xx statuses the vendor documents as transient
	// for this call: DoJSON does not classify them as refusals.
	Transient []int
	// KeepsRateLimit is set by a caller that keeps the vendor's rate limit
	// itself (the GitHub code host): Do returns a rate-limited 403 instead
	// of retrying it.
	KeepsRateLimit bool
}

// JSON sets the body to v encoded as JSON and the Content-Type header.
func (r Request) JSON(v any) Request {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("outbound: encode %s body: %v", r.Call, err)) // our own request types always encode
	}
	r.Body = b
	if r.Header == nil {
		r.Header = http.Header{}
	} else {
		r.Header = r.Header.Clone()
	}
	r.Header.Set("Content-Type", "application/json")
	return r
}

// Response is a response read in full (up to the cap).
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Error is a failed call: the adapter, the call, the HTTP status (0 when
// no response came) and a short prefix of the response body.
type Error struct {
	Adapter string
	Call    string
	Status  int
	Body    string
	Err     error
	// Refused is set when the status is a refusal that will not change
	// (Refusal): retrying is pointless.
	Refused bool
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Adapter + ": " + e.Call)
	if e.Status != 0 {
		b.WriteString(": status " + strconv.Itoa(e.Status))
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	if e.Body != "" {
		b.WriteString(": " + strconv.Quote(e.Body))
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// StatusOf returns the HTTP status of an *Error in err's chain, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// ErrTooLarge is wrapped by the error of a response over the body cap.
var ErrTooLarge = errors.New("response body too large")

// ErrMalformed is wrapped by the error of a response that does not decode.
var ErrMalformed = errors.New("malformed response")

// bodyPrefix is how much of a response body an error quotes.
const bodyPrefix = 200

// Do sends r, retrying as its Idempotent says (429 and a rate-limited 403
// are retried whatever it says, after the wait RetryWait reads from the
// answer, capped at MaxRetryAfter), and returns the last
// response whatever its status; it fails only when no usable response
// came (transport error, cap exceeded, cancelled context) or when the
// retries of a retryable status ran out.
func (c *Client) Do(ctx context.Context, r Request) (*Response, error) {
	u, err := url.Parse(r.URL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, c.fail(r, 0, nil, errors.New("bad URL: want http or https and a host"))
	}
	backoff := c.o.Backoff
	var lastErr error
	for attempt := 1; ; attempt++ {
		resp, err := c.once(ctx, u.Host, r)
		retryable := false
		var wait time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil, c.fail(r, 0, nil, ctx.Err())
			}
			var oe *Error
			if errors.As(err, &oe) {
				return nil, err // over the cap: retrying reads as much again
			}
			if errors.Is(err, netguard.ErrRefused) {
				return nil, c.guardRefusal(r, err)
			}
			lastErr = c.fail(r, 0, nil, err)
			retryable = r.Idempotent
		case !r.AnyStatus && (resp.Status == http.StatusTooManyRequests || (!r.KeepsRateLimit && RateLimited(resp.Status, resp.Header)) ||
			(resp.Status >= 500 && r.Idempotent)):
			lastErr = c.fail(r, resp.Status, resp.Body, nil)
			retryable = true
			wait = RetryWait(resp.Header, time.Now())
		default:
			return resp, nil
		}
		if !retryable || attempt >= c.o.Attempts {
			return nil, lastErr
		}
		if wait <= 0 {
			wait = backoff
			backoff = min(backoff*2, c.o.MaxBackoff)
		}
		wait = min(wait, c.o.MaxRetryAfter)
		if err := c.pause(ctx, wait); err != nil {
			return nil, c.fail(r, 0, nil, fmt.Errorf("%w (after: %v)", err, lastErr))
		}
	}
}

// once makes one attempt under the host's semaphore and the timeout.
func (c *Client) once(ctx context.Context, host string, r Request) (*Response, error) {
	sem := c.semaphore(host)
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-sem }()
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, body)
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		req.Header[k] = append([]string(nil), vs...)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "reconciler")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, scrubURLError(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.o.MaxBody+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > c.o.MaxBody {
		return nil, c.fail(r, resp.StatusCode, nil, fmt.Errorf("%w: over %d bytes", ErrTooLarge, c.o.MaxBody))
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// guardRefusal is the *Error of a call the guard refused to connect: a
// refusal (retrying is pointless while the flags stay as they are) whose
// text is the guard's alone. The guard decides before any connection is
// made, so the answer is the same whether anything listens at the address
// or not: a URL a token chooses is no port scanner.
func (c *Client) guardRefusal(r Request, err error) *Error {
	for {
		n := errors.Unwrap(err)
		if n == nil || n == netguard.ErrRefused {
			break
		}
		err = n
	}
	e := c.fail(r, 0, nil, fmt.Errorf("%s: %w", GuardRefusal, err))
	e.Refused = true
	return e
}

// GuardRefusal starts the message of a call the outbound guard refused.
const GuardRefusal = "refused by the outbound guard"

// scrubURLError drops the URL a *url.Error carries (its query may hold a
// key) and keeps the cause.
func scrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// semaphore returns the host's semaphore, creating it once.
func (c *Client) semaphore(host string) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.hosts[host]
	if !ok {
		s = make(chan struct{}, c.o.PerHost)
		c.hosts[host] = s
	}
	return s
}

// fail builds the *Error of call r.
func (c *Client) fail(r Request, status int, body []byte, err error) *Error {
	s := string(body)
	if len(s) > bodyPrefix {
		s = s[:bodyPrefix] + "..."
	}
	return &Error{Adapter: c.o.Adapter, Call: r.Call, Status: status, Body: s, Err: err}
}

// Unexpected is the error of call answered with a status the caller does
// not take: the adapter, the call, the status and the start of the body;
// Refused when the status is a refusal (Refusal) other than transient.
func (c *Client) Unexpected(call string, resp *Response, transient ...int) *Error {
	e := c.fail(Request{Call: call}, resp.Status, resp.Body, nil)
	e.Refused = Refusal(resp.Status, resp.Header, transient...)
	return e
}

// retryAfter parses a Retry-After header (seconds or an HTTP date) into a
// wait; 0 when absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// DoJSON sends r and decodes a 2xx response's JSON body into out (when
// out is not nil). Any other status is an *Error with that status; a body
// that does not decode is an *Error wrapping ErrMalformed.
func (c *Client) DoJSON(ctx context.Context, r Request, out any) (*Response, error) {
	if r.Header == nil {
		r.Header = http.Header{}
	} else {
		r.Header = r.Header.Clone()
	}
	if r.Header.Get("Accept") == "" {
		r.Header.Set("Accept", "application/json")
	}
	resp, err := c.Do(ctx, r)
	if err != nil {
		return nil, err
	}
	if resp.Status < 200 || resp.Status > 299 {
		e := c.fail(r, resp.Status, resp.Body, errors.New(http.StatusText(resp.Status)))
		e.Refused = Refusal(resp.Status, resp.Header, r.Transient...)
		return resp, e
	}
	if out != nil {
		if err := c.Decode(r.Call, resp, out); err != nil {
			return resp, err
		}
	}
	return resp, nil
}

// Decode decodes resp's JSON body into out; a body that does not decode
// is an *Error wrapping ErrMalformed.
func (c *Client) Decode(call string, resp *Response, out any) error {
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return c.fail(Request{Call: call}, resp.Status, resp.Body, fmt.Errorf("%w: %v", ErrMalformed, err))
	}
	return nil
}

// Errorf is an *Error of the adapter's call that no response status
// explains (a response that makes no sense, a refused configuration).
func (c *Client) Errorf(call, format string, args ...any) error {
	return &Error{Adapter: c.o.Adapter, Call: call, Err: fmt.Errorf(format, args...)}
}
