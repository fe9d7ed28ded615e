// Package client is a small typed Go client of reconciler's HTTP API
// (package api), for embedders and for the reconciler CLI.
//
// Invariants: every call sends the bearer token it was built with (none
// when empty); ids are path-escaped; a non-2xx answer is returned as a
// *Error carrying the RFC 9457 problem, matched with errors.Is against
// ports.ErrNotFound (404), ports.ErrConflict (409; 412, a stale version), release.ErrInvalid
// (400, 413, 422) and ErrUnauthorized (401, 403).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// ErrUnauthorized matches a refused credential (401) or scope (403).
var ErrUnauthorized = errors.New("unauthorized")

// maxResponseBytes caps what a response body may hold.
const maxResponseBytes = 64 << 20

// Client calls one reconciler server.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// Option tunes a Client.
type Option func(*Client)

// WithHTTPClient sends requests through hc (default: a client with a
// 30-second timeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// New returns a client of the server at server (http://host:port, with or
// without /api/v1) authenticating with token.
func New(server, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(strings.TrimSuffix(server, "/"), api.Prefix))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server %q: want http(s)://HOST[:PORT]: %w", server, release.ErrInvalid)
	}
	c := &Client{base: u, token: token, http: &http.Client{Timeout: 30 * time.Second}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Error is a problem the server answered (RFC 9457).
type Error struct {
	Status int    `json:"status"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	Errors []struct {
		Message  string `json:"message"`
		Location string `json:"location"`
	} `json:"errors,omitempty"`
}

// Error renders the problem with each located detail.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", e.Status, e.Title)
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	for _, d := range e.Errors {
		if d.Location != "" && !strings.Contains(e.Detail, d.Message) {
			fmt.Fprintf(&b, "\n  %s: %s", d.Location, d.Message)
		}
	}
	return b.String()
}

// Is matches the sentinel of the problem's status.
func (e *Error) Is(target error) bool {
	switch e.Status {
	case http.StatusNotFound:
		return target == ports.ErrNotFound
	case http.StatusConflict, http.StatusPreconditionFailed:
		return target == ports.ErrConflict
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return target == release.ErrInvalid
	case http.StatusUnauthorized, http.StatusForbidden:
		return target == ErrUnauthorized
	}
	return false
}

// do sends method path (under /api/v1; query included) with in as the JSON
// body (nil: none) and decodes the answer into out (nil: discard).
func (c *Client) do(ctx context.Context, method, path string, in, out any, header ...string) error {
	var body io.Reader
	var raw []byte
	if in != nil {
		var err error
		if raw, err = json.Marshal(in); err != nil {
			return fmt.Errorf("%s %s: encode: %w", method, path, err)
		}
		body = bytes.NewReader(raw)
	}
	return c.send(ctx, method, path, body, raw != nil, out, header...)
}

func (c *Client) send(ctx context.Context, method, path string, body io.Reader, hasBody bool, out any, header ...string) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+api.Prefix+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if res.StatusCode >= 300 {
		return answerError(res.StatusCode, b)
	}
	if out == nil || res.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// answerError is the *Error of a non-2xx answer of status with body b.
func answerError(status int, b []byte) *Error {
	e := &Error{Status: status, Title: http.StatusText(status)}
	if json.Unmarshal(b, e) != nil || e.Status == 0 {
		e.Status, e.Detail = status, strings.TrimSpace(string(b))
	}
	return e
}

// get reads path into a T.
func get[T any](ctx context.Context, c *Client, path string) (T, error) {
	var v T
	return v, c.do(ctx, http.MethodGet, path, nil, &v)
}

// post sends in to path and reads a T.
func post[T any](ctx context.Context, c *Client, method, path string, in any) (T, error) {
	var v T
	return v, c.do(ctx, method, path, in, &v)
}

// query renders non-empty pairs as a query string ("" when none).
func query(pairs ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" && pairs[i+1] != "0" {
			q.Set(pairs[i], pairs[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// esc escapes one path segment.
func esc(s string) string { return url.PathEscape(s) }
