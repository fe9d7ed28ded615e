package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/console"
)

// httpOptions are serve's listener settings: timeouts, the long-poll cap,
// TLS and the public URL.
type httpOptions struct {
	readHeaderTimeout time.Duration
	readTimeout       time.Duration
	writeTimeout      time.Duration
	idleTimeout       time.Duration
	maxLongPolls      int
	tlsCertFile       string
	tlsKeyFile        string
	publicURL         string
}

// httpFlags registers the listener flags (kept together here).
func httpFlags(f *pflag.FlagSet, o *httpOptions) {
	durationRangeVar(f, &o.readHeaderTimeout, "read-header-timeout", 5*time.Second, 100*time.Millisecond, time.Hour, "how long a client may take to send a request's headers")
	durationRangeVar(f, &o.readTimeout, "read-timeout", 30*time.Second, 100*time.Millisecond, time.Hour, "how long a client may take to send a whole request, body included")
	durationRangeVar(f, &o.writeTimeout, "write-timeout", time.Minute, 100*time.Millisecond, time.Hour, "how long a response may take from the end of the request's headers (a pull agent's take with ?wait gets its wait on top; an event stream, GET /api/v1/events or the console's /events, has no deadline)")
	durationRangeVar(f, &o.idleTimeout, "idle-timeout", 2*time.Minute, 100*time.Millisecond, time.Hour, "how long an idle keep-alive connection stays open")
	intRangeVar(f, &o.maxLongPolls, "max-long-polls", api.DefaultLongPolls, 1, 10_000, "most waiting takes (?wait) and event streams (GET /api/v1/events) one token or signing agent may hold open at once; 429 with Retry-After beyond")
	f.StringVar(&o.tlsCertFile, "tls-cert-file", "", "serve --listen over TLS with this PEM certificate (chain); re-read when the file changes; needs --tls-key-file")
	f.StringVar(&o.tlsKeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file; re-read when the file changes")
	f.StringVar(&o.publicURL, "public-url", "", "the URL users reach the console at (e.g. https://reconciler.example.com behind a TLS proxy): https makes the session cookie Secure")
}

// check refuses inconsistent listener flags, naming them.
func (o httpOptions) check() error {
	if (o.tlsCertFile == "") != (o.tlsKeyFile == "") {
		return usagef("--tls-cert-file and --tls-key-file: give both or neither")
	}
	if o.publicURL != "" {
		u, err := url.Parse(o.publicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("--public-url %q: want an absolute http:// or https:// URL", o.publicURL)
		}
	}
	return nil
}

// secureCookies reports whether the console's cookie must be Secure: it
// is served over TLS here, or reached through an https --public-url.
func (o httpOptions) secureCookies() bool {
	return o.tlsCertFile != "" || strings.HasPrefix(strings.ToLower(o.publicURL), "https://")
}

// server is the http.Server of a listener with o's timeouts; longWrites
// leaves the write timeout off (the admin listener's profiles run long).
func (o httpOptions) server(h http.Handler, longWrites bool) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: o.readHeaderTimeout, ReadTimeout: o.readTimeout,
		WriteTimeout: o.writeTimeout, IdleTimeout: o.idleTimeout}
	if longWrites {
		srv.WriteTimeout = 0
	}
	return srv
}

// certReloader serves the certificate of a cert and key file pair and
// reads them again when either file's modification time or size changes,
// so a renewed certificate is served without a restart. A pair that fails
// to load keeps the last good one (the error is logged).
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu    sync.Mutex
	stamp string
	cert  *tls.Certificate
}

// newCertReloader loads the pair once, so a bad pair fails serve at start.
func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log}
	if _, err := r.load(); err != nil {
		return nil, usagef("--tls-cert-file/--tls-key-file: %v", err)
	}
	return r, nil
}

// stampOf identifies the files' current versions.
func (r *certReloader) stampOf() (string, error) {
	var b strings.Builder
	for _, f := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("stat %s: %w", f, err)
		}
		fmt.Fprintf(&b, "%d/%d;", fi.ModTime().UnixNano(), fi.Size())
	}
	return b.String(), nil
}

// load returns the current certificate, reading the files again when
// they changed.
func (r *certReloader) load() (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	stamp, err := r.stampOf()
	if err == nil && stamp == r.stamp && r.cert != nil {
		return r.cert, nil
	}
	if err == nil {
		var c tls.Certificate
		if c, err = tls.LoadX509KeyPair(r.certFile, r.keyFile); err == nil {
			r.stamp, r.cert = stamp, &c
			return r.cert, nil
		}
		err = fmt.Errorf("load certificate: %w", err)
	}
	if r.cert == nil {
		return nil, err
	}
	if r.log != nil {
		r.log.Error("tls certificate reload failed; serving the previous one", "cert_file", r.certFile, "error", err)
	}
	return r.cert, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.load()
}

// insecureGuard protects a --insecure-no-auth listener, where every
// caller is admin, from web pages: a request whose Host is not a
// loopback name (DNS rebinding) is refused 421, and an API write (POST,
// PUT, PATCH, DELETE) is refused 415 unless its body is JSON (a form
// cannot send that cross-site without a preflight) or it has no body,
// and 403 when it comes from another site (Origin, Sec-Fetch-Site).
func insecureGuard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			problem(w, http.StatusMisdirectedRequest, fmt.Sprintf("Host %q refused: --insecure-no-auth serves only loopback names (127.0.0.1, [::1], localhost)", r.Host))
			return
		}
		if strings.HasPrefix(r.URL.Path, api.Prefix+"/") && writeMethod(r.Method) {
			if !console.SameOrigin(r) {
				problem(w, http.StatusForbidden, "cross-site request refused (--insecure-no-auth)")
				return
			}
			if hasBody(r) && !jsonType(r.Header.Get("Content-Type")) {
				problem(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json (--insecure-no-auth refuses other writes)")
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// problem writes an RFC 9457 problem.
func problem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	fmt.Fprintf(w, "{\"title\":%q,\"status\":%d,\"detail\":%q}\n", http.StatusText(status), status, detail)
}

func writeMethod(m string) bool {
	switch m {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 || r.Header.Get("Content-Type") != "" || len(r.TransferEncoding) > 0
}

// jsonType reports whether a Content-Type is JSON (application/json or
// application/*+json).
func jsonType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")))
}

// loopbackHost reports whether a Host header names this machine's
// loopback: localhost, 127.0.0.0/8 or ::1, with or without a port.
func loopbackHost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		var addrErr *net.AddrError
		if !errors.As(err, &addrErr) {
			return false
		}
		h = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
