package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHealthcheck: exit 0 on 200 with the body printed, 1 on any other
// status (naming it) or no answer, 2 on a bad --url or --timeout.
func TestHealthcheck(t *testing.T) {
	t.Parallel()
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/readyz", r.URL.Path)
		w.WriteHeader(status)
		_, _ = w.Write([]byte("ok\n"))
	}))
	defer srv.Close()

	res := runCLI(t, "", "healthcheck", "--url", srv.URL+"/readyz")
	require.Equal(t, 0, res.code, res.stderr)
	require.Equal(t, "ok\n", res.stdout)

	status = http.StatusServiceUnavailable
	res = runCLI(t, "", "healthcheck", "--url", srv.URL+"/readyz")
	require.Equal(t, 1, res.code)
	require.ErrorContains(t, res.err, "503")

	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	res = runCLI(t, "", "healthcheck", "--url", closed.URL+"/readyz")
	require.Equal(t, 1, res.code)

	res = runCLI(t, "", "healthcheck", "--url", "ftp://x/readyz")
	require.Equal(t, 2, res.code)
	require.ErrorContains(t, res.err, "--url")
	res = runCLI(t, "", "healthcheck", "--timeout", "1ns")
	require.Equal(t, 2, res.code)
	require.ErrorContains(t, res.err, "--timeout")
}
