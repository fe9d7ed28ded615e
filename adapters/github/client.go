package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/internal/netguard"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Defaults used when Config leaves a knob at zero.
const (
	DefaultBaseURL = "https://api.github.com"
	DefaultMaxWait = 30 * time.Second
	DefaultTimeout = 30 * time.Second
	// maxBody caps a response body read.
	maxBody = 4 << 20
)

// ErrRateLimited is wrapped by a call refused because the rate limit is
// spent until a time further than MaxWait away.
var ErrRateLimited = errors.New("github rate limit exhausted")

// Config configures the client.
type Config struct {
	// BaseURL is the REST API root (default https://api.github.com; a
	// GitHub Enterprise root ends in /api/v3).
	BaseURL string
	// Token references the API token, resolved per request.
	Token release.SecretRef
	// MergeMethod is merge, squash or rebase (default merge).
	MergeMethod string
	// MaxWait is the longest a call waits for the rate limit or a
	// Retry-After before failing (default 30 s).
	MaxWait time.Duration
	// Transport sends the requests (default: Guard's transport).
	Transport http.RoundTripper
	// Guard decides which addresses the client may reach (nil: public ones
	// only; serve passes --outbound-allow).
	Guard *netguard.Guard
}

// Client is the GitHub code host.
type Client struct {
	cfg     Config
	secrets ports.SecretResolver
	out     *outbound.Client
	now     func() time.Time
	sleep   func(context.Context, time.Duration) error

	mu      sync.Mutex
	resetAt time.Time // the rate limit is spent until then

	keysMu sync.Mutex
	keys   map[string]*keyLock // the idempotency keys with a call in flight
}

// keyLock serialises the calls of one idempotency key; refs counts the
// calls holding or waiting for it.
type keyLock struct {
	mu   sync.Mutex
	refs int
}

// lockKey makes concurrent calls with the same idempotency key run one
// after the other (so the second sees what the first posted); it returns
// the unlock.
func (c *Client) lockKey(key string) func() {
	c.keysMu.Lock()
	if c.keys == nil {
		c.keys = map[string]*keyLock{}
	}
	l := c.keys[key]
	if l == nil {
		l = &keyLock{}
		c.keys[key] = l
	}
	l.refs++
	c.keysMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		c.keysMu.Lock()
		defer c.keysMu.Unlock()
		if l.refs--; l.refs == 0 {
			delete(c.keys, key)
		}
	}
}

var (
	_ ports.CodeHost     = (*Client)(nil)
	_ ports.PullRequests = (*Client)(nil)
)

// New returns a client; secrets resolves Config.Token.
func New(cfg Config, secrets ports.SecretResolver) (*Client, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	switch cfg.MergeMethod {
	case "":
		cfg.MergeMethod = "merge"
	case "merge", "squash", "rebase":
	default:
		return nil, fmt.Errorf("github: merge method %q: want merge, squash or rebase", cfg.MergeMethod)
	}
	if cfg.Token.Ref == "" {
		return nil, errors.New("github: token reference is empty")
	}
	if secrets == nil {
		return nil, errors.New("github: no secret resolver for the token")
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	out := outbound.New(outbound.Options{Adapter: "github", Timeout: DefaultTimeout, MaxRetryAfter: cfg.MaxWait,
		MaxBody: maxBody, Transport: cfg.Transport, Guard: cfg.Guard})
	return &Client{cfg: cfg, secrets: secrets, out: out, now: time.Now, sleep: ports.Sleep}, nil
}

// apiError is a non-2xx answer: the call, the status and GitHub's message.
type apiError struct {
	call    string
	status  int
	message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("github: %s: status %d: %s", e.call, e.status, e.message)
}

// statusOf returns the HTTP status of an apiError in err's chain, or 0.
func statusOf(err error) int {
	var e *apiError
	if errors.As(err, &e) {
		return e.status
	}
	return 0
}

// do sends one API call through the shared outbound client (timeouts,
// retries of 429 and 5xx with Retry-After, body cap, errors that never
// quote a header) and decodes a 2xx JSON answer into out (when not nil).
// On top of it, it keeps GitHub's rate limit: a spent limit
// (X-RateLimit-Remaining 0) holds calls until X-RateLimit-Reset, and a 403
// with Retry-After (the secondary limit) is retried once, both up to
// MaxWait.
func (c *Client) do(ctx context.Context, call, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("github: %s: encode: %w", call, err)
		}
		body = b
	}
	for attempt := 0; ; attempt++ {
		if err := c.waitLimit(ctx, call); err != nil {
			return err
		}
		req, err := c.request(ctx, call, method, path, body)
		if err != nil {
			return err
		}
		resp, err := c.out.Do(ctx, req)
		if err != nil {
			return err
		}
		c.noteLimit(resp.Header)
		if resp.Status >= 200 && resp.Status < 300 {
			if out == nil || len(resp.Body) == 0 {
				return nil
			}
			if err := json.Unmarshal(resp.Body, out); err != nil {
				return fmt.Errorf("github: %s: decode response: %w", call, err)
			}
			return nil
		}
		limited := resp.Status == http.StatusTooManyRequests || resp.Status == http.StatusForbidden
		if wait, ok := retryAfter(resp.Header); ok && limited && attempt == 0 {
			if wait > c.cfg.MaxWait {
				return fmt.Errorf("github: %s: retry after %s: %w", call, wait, ErrRateLimited)
			}
			if err := c.sleep(ctx, wait); err != nil {
				return fmt.Errorf("github: %s: %w", call, err)
			}
			continue
		}
		if limited && attempt == 0 && resp.Header.Get("X-RateLimit-Remaining") == "0" {
			continue // waitLimit waits for the reset, or refuses
		}
		var msg struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(resp.Body, &msg)
		if msg.Message == "" {
			msg.Message = http.StatusText(resp.Status)
		}
		if resp.Status == http.StatusNotFound {
			return fmt.Errorf("%w: %w", &apiError{call, resp.Status, msg.Message}, ports.ErrNotFound)
		}
		return &apiError{call, resp.Status, msg.Message}
	}
}

// request builds the call with the token, resolved now.
func (c *Client) request(ctx context.Context, call, method, path string, body []byte) (outbound.Request, error) {
	token, err := c.secrets.Resolve(ctx, c.cfg.Token)
	if err != nil {
		return outbound.Request{}, fmt.Errorf("github: %s: token: %w", call, err)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	h.Set("Accept", "application/vnd.github+json")
	h.Set("X-GitHub-Api-Version", "2022-11-28")
	if body != nil {
		h.Set("Content-Type", "application/json")
	}
	return outbound.Request{Call: call, Method: method, URL: c.cfg.BaseURL + path, Header: h, Body: body,
		Idempotent: method == http.MethodGet || method == http.MethodPut, KeepsRateLimit: true}, nil
}

// waitLimit holds a call while the rate limit is spent, up to MaxWait.
func (c *Client) waitLimit(ctx context.Context, call string) error {
	c.mu.Lock()
	wait := c.resetAt.Sub(c.now())
	c.mu.Unlock()
	if wait <= 0 {
		return nil
	}
	if wait > c.cfg.MaxWait {
		return fmt.Errorf("github: %s: rate limit resets in %s: %w", call, wait.Round(time.Second), ErrRateLimited)
	}
	if err := c.sleep(ctx, wait); err != nil {
		return fmt.Errorf("github: %s: %w", call, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.resetAt.After(c.now().Add(wait)) {
		c.resetAt = time.Time{} // waited until the reset
	}
	return nil
}

// noteLimit records a spent rate limit from the response headers.
func (c *Client) noteLimit(h http.Header) {
	if h.Get("X-RateLimit-Remaining") != "0" {
		return
	}
	reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resetAt = time.Unix(reset, 0)
}

// retryAfter reads a Retry-After in seconds.
func retryAfter(h http.Header) (time.Duration, bool) {
	if s := h.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			return time.Duration(n) * time.Second, true
		}
	}
	return 0, false
}
