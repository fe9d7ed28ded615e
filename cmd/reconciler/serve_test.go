package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serveAddrs starts `reconciler serve` with args and env, and returns the
// addresses its API and admin listeners logged, reading the log with parse
// (one line → message and addr, ok false when the line is not in the
// expected format).
func serveAddrs(t *testing.T, env []string, parse func(line string) (msg, addr string, ok bool), args ...string) (api, admin string) {
	t.Helper()
	bin, err := buildBinary()
	require.NoError(t, err)
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Env = append(append(os.Environ(), "RECONCILER_DSN=", "RECONCILER_LOG_FORMAT=", "RECONCILER_ADMIN_LISTEN="), env...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	type found struct{ msg, addr string }
	lines := make(chan found, 16)
	bad := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			msg, addr, ok := parse(sc.Text())
			if !ok {
				select {
				case bad <- sc.Text():
				default:
				}
				continue
			}
			if msg == "listening" || msg == "admin listening" || msg == "engine starting" {
				lines <- found{msg, addr}
			}
		}
	}()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case f := <-lines:
			switch f.msg {
			case "listening":
				api = f.addr
			case "admin listening":
				admin = f.addr
			case "engine starting":
				return api, admin
			}
		case line := <-bad:
			t.Fatalf("log line in the wrong format: %s", line)
		case <-deadline:
			t.Fatal("serve did not start")
		}
	}
}

func parseJSONLine(line string) (string, string, bool) {
	var rec struct{ Msg, Addr string }
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		return "", "", false
	}
	return rec.Msg, rec.Addr, true
}

func parseTextLine(line string) (string, string, bool) {
	if !strings.HasPrefix(line, "time=") {
		return "", "", false
	}
	msg, addr := "", ""
	if _, rest, ok := strings.Cut(line, "msg="); ok {
		if strings.HasPrefix(rest, `"`) {
			msg, _, _ = strings.Cut(rest[1:], `"`)
		} else {
			msg, _, _ = strings.Cut(rest, " ")
		}
	}
	if _, rest, ok := strings.Cut(line, " addr="); ok {
		addr, _, _ = strings.Cut(rest, " ")
	}
	return msg, addr, true
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(b)
}

// TestServeAdminListener: /debug/pprof is served on --admin-listen and
// never on the API listener; RECONCILER_LOG_FORMAT=json gives JSON lines.
func TestServeAdminListener(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	t.Parallel()
	api, admin := serveAddrs(t, []string{"RECONCILER_LOG_FORMAT=json"}, parseJSONLine,
		"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--demo=false")
	require.NotEmpty(t, api)
	require.NotEmpty(t, admin)
	code, body := httpGet(t, "http://"+admin+"/debug/pprof/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "goroutine")
	code, _ = httpGet(t, "http://"+admin+"/debug/pprof/cmdline")
	require.Equal(t, http.StatusOK, code)
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/goroutine"} {
		code, _ = httpGet(t, "http://"+api+path)
		require.Equal(t, http.StatusNotFound, code, "the API listener never serves %s", path)
	}
	code, _ = httpGet(t, "http://"+api+"/metrics")
	require.Equal(t, http.StatusOK, code)
	code, _ = httpGet(t, "http://"+admin+"/metrics")
	require.Equal(t, http.StatusNotFound, code, "the admin listener serves profiles only")
}

// TestServeNoAdminByDefault: without --admin-listen there is no admin
// listener, and --log-format on the command line beats the environment.
func TestServeNoAdminByDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	t.Parallel()
	api, admin := serveAddrs(t, []string{"RECONCILER_LOG_FORMAT=json"}, parseTextLine,
		"--listen", "127.0.0.1:0", "--log-format", "text", "--demo=false")
	require.NotEmpty(t, api)
	require.Empty(t, admin, "no admin listener unless asked for")
	code, _ := httpGet(t, "http://"+api+"/debug/pprof/")
	require.Equal(t, http.StatusNotFound, code)
}

// TestServeBadLogFormat: a bad format, by flag or by environment, is a
// usage error naming the flag or variable.
func TestServeBadLogFormat(t *testing.T) {
	res := runCLI(t, "", "serve", "--log-format", "xml", "--listen", "")
	require.Equal(t, 2, res.code)
	require.ErrorContains(t, res.err, `--log-format: want text or json, got "xml"`)
	t.Setenv("RECONCILER_LOG_FORMAT", "yaml")
	res = runCLI(t, "", "serve", "--listen", "")
	require.Equal(t, 2, res.code)
	require.ErrorContains(t, res.err, "yaml")
}

// TestServeExportsTraces: with --otlp-endpoint, serve's spans (the demo's
// passes) reach the collector over OTLP/HTTP.
func TestServeExportsTraces(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	t.Parallel()
	posts := make(chan string, 64)
	collector := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case posts <- r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type"):
		default:
		}
	}))
	defer collector.Close()
	serveAddrs(t, []string{"RECONCILER_LOG_FORMAT=json"}, parseJSONLine, "--listen", "127.0.0.1:0", "--otlp-endpoint", collector.URL)
	select {
	case got := <-posts:
		require.Equal(t, "POST /v1/traces application/x-protobuf", got)
	case <-time.After(30 * time.Second): // the batcher exports every 5 s
		t.Fatal("no spans reached the collector")
	}
}
