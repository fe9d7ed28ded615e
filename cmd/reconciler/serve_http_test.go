package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/envsecret"
)

// hardenedServe runs serve in this process (memory, no demo) with the
// listener settings h and returns the address it listens on.
func hardenedServe(t *testing.T, h httpOptions, insecure bool) string {
	t.Helper()
	o := serveOptions{listen: "127.0.0.1:0", concurrency: 1, lock: 30 * time.Second,
		resyncInterval: time.Minute, stallThreshold: time.Minute, unknownPodGrace: time.Minute, maxAutoResumes: 1,
		shutdownTimeout: 5 * time.Second, logLevel: "info", logFormat: "json", secretPrefix: envsecret.DefaultPrefix,
		insecureNoAuth: insecure, http: h,
		agents: agentOptions{workRoot: t.TempDir(), stopGrace: time.Second, heartbeat: time.Second}}
	records, stop := startServeInProcess(t, o)
	t.Cleanup(stop)
	for {
		r, ok := <-records
		require.True(t, ok, "serve stopped before it listened")
		if r["msg"] == "listening" {
			return r["addr"].(string)
		}
	}
}

// closedByServer reads conn to its end and requires that the server
// closed it (EOF or reset) before the test's own deadline; it returns
// what was read.
func closedByServer(t *testing.T, conn net.Conn) string {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
	b, err := io.ReadAll(conn)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server kept the connection open: %v", err)
	return string(b)
}

// TestServeTimeouts: an unauthenticated slow body on /login is cut off
// by --read-timeout, and an idle keep-alive connection by --idle-timeout
// (issue 28, finding 6).
func TestServeTimeouts(t *testing.T) {
	t.Parallel()
	addr := hardenedServe(t, httpOptions{readHeaderTimeout: 200 * time.Millisecond, readTimeout: 300 * time.Millisecond,
		writeTimeout: 10 * time.Second, idleTimeout: 300 * time.Millisecond}, false)

	slow, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer slow.Close()
	_, err = io.WriteString(slow, "POST /login HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/x-www-form-urlencoded\r\n"+
		"Content-Length: 1000\r\n\r\ntoken=")
	require.NoError(t, err)
	closedByServer(t, slow) // the rest of the body never comes

	idle, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer idle.Close()
	_, err = io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(idle), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.NotEqual(t, "close", res.Header.Get("Connection"), "kept alive")
	closedByServer(t, idle)
}

// TestInsecureNoAuthGuard: without auth, a Host that is not loopback (DNS
// rebinding) is refused, and so is an API write that is not JSON or comes
// from another site, so a web page cannot create an admin token (issue
// 28, finding 7).
func TestInsecureNoAuthGuard(t *testing.T) {
	t.Parallel()
	addr := hardenedServe(t, httpOptions{}, true)
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	const create = `{"name":"x","scopes":["admin"]}`
	cases := []struct {
		name, method, host, ctype, origin, body string
		want                                    int
	}{
		{"rebound host", http.MethodGet, "evil.example:" + port, "", "", "", http.StatusMisdirectedRequest},
		{"rebound host, no port", http.MethodGet, "evil.example", "", "", "", http.StatusMisdirectedRequest},
		{"console on a rebound host", http.MethodGet, "evil.example", "", "", "", http.StatusMisdirectedRequest},
		{"localhost", http.MethodGet, "localhost:" + port, "", "", "", http.StatusOK},
		{"127.0.0.2", http.MethodGet, "127.0.0.2:" + port, "", "", "", http.StatusOK},
		{"::1", http.MethodGet, "[::1]:" + port, "", "", "", http.StatusOK},
		{"form post", http.MethodPost, addr, "application/x-www-form-urlencoded", "", "name=x&scopes=admin", http.StatusUnsupportedMediaType},
		{"text/plain post", http.MethodPost, addr, "text/plain", "", create, http.StatusUnsupportedMediaType},
		{"multipart post", http.MethodPost, addr, "multipart/form-data; boundary=x", "", create, http.StatusUnsupportedMediaType},
		{"no content type", http.MethodPost, addr, "", "", create, http.StatusUnsupportedMediaType},
		{"cross-site json", http.MethodPost, addr, "application/json", "https://evil.example", create, http.StatusForbidden},
		{"json", http.MethodPost, addr, "application/json", "", create, http.StatusCreated},
	}
	for _, c := range cases {
		path := "/api/v1/tokens"
		if c.name == "console on a rebound host" {
			path = "/"
		}
		req, err := http.NewRequestWithContext(t.Context(), c.method, "http://"+addr+path, strings.NewReader(c.body))
		require.NoError(t, err)
		req.Host = c.host
		if c.body == "" {
			req.Body, req.ContentLength = nil, 0
		}
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err, c.name)
		b, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		require.Equal(t, c.want, res.StatusCode, "%s: %s", c.name, b)
	}
	list, err := http.Get("http://" + addr + "/api/v1/tokens")
	require.NoError(t, err)
	b, _ := io.ReadAll(list.Body)
	_ = list.Body.Close()
	require.Equal(t, 1, strings.Count(string(b), `"name":"x"`), "only the JSON request created a token: %s", b)
}

// writeCert writes a fresh self-signed certificate for 127.0.0.1 with
// serial to certFile and keyFile.
func writeCert(t *testing.T, certFile, keyFile string, serial int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "reconciler test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600))
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
}

// TestServeTLSReloadsCertificate: --tls-cert-file/--tls-key-file serve
// TLS, a rotated certificate is served without a restart, and the
// console's session cookie is Secure.
func TestServeTLSReloadsCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeCert(t, certFile, keyFile, 1)
	addr := hardenedServe(t, httpOptions{tlsCertFile: certFile, tlsKeyFile: keyFile}, true)
	serial := func() int64 {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a self-signed test certificate
		require.NoError(t, err)
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	require.Equal(t, int64(1), serial())

	writeCert(t, certFile, keyFile, 2)
	later := time.Now().Add(time.Minute) // a new modification time even on a coarse clock
	require.NoError(t, os.Chtimes(certFile, later, later))
	require.NoError(t, os.Chtimes(keyFile, later, later))
	require.Equal(t, int64(2), serial(), "the rotated certificate is served")

	// A broken rotation keeps the last good certificate.
	require.NoError(t, os.WriteFile(certFile, []byte("not a certificate"), 0o600))
	require.Equal(t, int64(2), serial())
}

// TestHTTPOptionsCheck: inconsistent listener flags are usage errors
// naming the flag.
func TestHTTPOptionsCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		o    httpOptions
		want string
	}{
		{httpOptions{tlsCertFile: "c"}, "--tls-cert-file and --tls-key-file"},
		{httpOptions{tlsKeyFile: "k"}, "--tls-cert-file and --tls-key-file"},
		{httpOptions{publicURL: "reconciler.example"}, "--public-url"},
		{httpOptions{publicURL: "ftp://reconciler.example"}, "--public-url"},
		{httpOptions{publicURL: "https://reconciler.example"}, ""},
	} {
		err := c.o.check()
		if c.want == "" {
			require.NoError(t, err)
			require.True(t, c.o.secureCookies())
			continue
		}
		var ue usageError
		require.ErrorAs(t, err, &ue)
		require.ErrorContains(t, err, c.want)
	}
	require.False(t, httpOptions{publicURL: "http://127.0.0.1:8080"}.secureCookies())
}

// TestAgentUserAndEnvFlags: --agent-user resolves a name or UID[:GID] and
// refuses root and bad groups; --agent-env NAME passes serve's own NAME
// through and is refused when it is not set.
func TestAgentUserAndEnvFlags(t *testing.T) {
	if os.Geteuid() != 0 {
		_, err := agentCredential("65534")
		require.ErrorContains(t, err, "must run as root")
	} else {
		for spec, want := range map[string][2]uint32{"65534": {65534, 65534}, "65534:100": {65534, 100}} {
			c, err := agentCredential(spec)
			require.NoError(t, err, spec)
			require.Equal(t, want, [2]uint32{c.Uid, c.Gid}, spec)
		}
		for spec, why := range map[string]string{"0": "is root", "65534:staff": "must be a number", "no-such-user-x": "--agent-user"} {
			_, err := agentCredential(spec)
			var ue usageError
			require.ErrorAs(t, err, &ue, spec)
			require.ErrorContains(t, err, why, spec)
		}
	}
	t.Setenv("RECONCILER_TEST_PASS", "through")
	c, err := agentOptions{env: []string{"RECONCILER_TEST_PASS", "MODE=fast"}, workRoot: t.TempDir(), stopGrace: time.Second, heartbeat: time.Second}.config()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"RECONCILER_TEST_PASS": "through", "MODE": "fast"}, c.Env)
	_, err = agentOptions{env: []string{"RECONCILER_TEST_UNSET_X"}, workRoot: t.TempDir(), stopGrace: time.Second, heartbeat: time.Second}.config()
	require.ErrorContains(t, err, "RECONCILER_TEST_UNSET_X")
}

// TestServeLongPollOutlivesWriteTimeout: a pull agent's take waiting
// longer than --write-timeout still gets its answer (204 when no job
// came): the long-poll route moves its own write deadline.
func TestServeLongPollOutlivesWriteTimeout(t *testing.T) {
	t.Parallel()
	addr := hardenedServe(t, httpOptions{readHeaderTimeout: time.Second, readTimeout: time.Second,
		writeTimeout: 200 * time.Millisecond, idleTimeout: time.Second}, true)
	put, err := http.NewRequestWithContext(t.Context(), http.MethodPut, "http://"+addr+"/api/v1/job-agents/ext",
		strings.NewReader(`{"id":"ext","name":"ext","type":"pull"}`))
	require.NoError(t, err)
	put.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(put)
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	require.Less(t, res.StatusCode, 300, string(b))

	res, err = http.Post("http://"+addr+"/api/v1/job-agents/ext/jobs/next?wait=1s", "application/json", strings.NewReader(`{"taker":"t"}`))
	require.NoError(t, err, "the connection was not cut at the write timeout")
	b, _ = io.ReadAll(res.Body)
	_ = res.Body.Close()
	require.Equal(t, http.StatusNoContent, res.StatusCode, string(b))
}
