package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/envsecret"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
)

// TestServeNamesItsStandIn runs serve in memory (with and without the
// demo) and on Postgres, and requires each to say at start, in a WARN
// record, which of the run kinds' outside world is a stand-in, and to show
// it in /readyz?verbose.
func TestServeNamesItsStandIn(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		postgres     bool
		demo         bool
		agents, code string
	}{
		{"memory, demo", false, true, standInDemo, standInDemo},
		{"memory, no demo", false, false, "real", standInCodeRecord},
		{"postgres", true, true, "real", standInCodeRecord}, // --demo is ignored with --dsn
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := serveOptions{migrate: true, listen: "127.0.0.1:0", concurrency: 1, lock: 30 * time.Second,
				resyncInterval: time.Minute, stallThreshold: time.Minute, unknownPodGrace: time.Minute, maxAutoResumes: 1,
				shutdownTimeout: 5 * time.Second, logLevel: "info", logFormat: "json", demo: c.demo,
				secretPrefix: envsecret.DefaultPrefix,
				agents:       agentOptions{workRoot: t.TempDir(), stopGrace: time.Second, heartbeat: time.Second}}
			if c.postgres {
				o.dsn, _ = pgtest.Schema(t)
			}
			records, stop := startServeInProcess(t, o)
			defer stop()

			var warn map[string]any
			addr := ""
			for addr == "" {
				r, ok := <-records
				require.True(t, ok, "serve stopped before it listened")
				if r["level"] == "WARN" && r["agent_runtime"] != nil {
					warn = r
				}
				if r["msg"] == "listening" {
					addr, _ = r["addr"].(string)
				}
			}
			require.NotNil(t, warn, "a WARN record naming the stand-in comes before serve listens")
			require.Equal(t, c.agents, warn["agent_runtime"])
			require.Equal(t, c.code, warn["code_host"])
			require.Contains(t, warn["msg"], "stand-ins")

			body := get(t, "http://"+addr+"/readyz?verbose")
			require.Contains(t, body, "[+]runtime ok: agent runtime: "+c.agents+"; code host: "+c.code+"\n")
			require.Contains(t, body, "[+]queue ok\n")
			require.Equal(t, "ok\n", get(t, "http://"+addr+"/readyz"), "a stand-in does not fail readiness")
			require.Contains(t, get(t, "http://"+addr+"/readyz/runtime?verbose"), "code host: "+c.code)
		})
	}
}

// startServeInProcess runs runServe with o, its JSON log records sent on
// the returned channel (closed when serve returns); stop ends serve and
// requires that it returned no error.
func startServeInProcess(t *testing.T, o serveOptions) (<-chan map[string]any, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	o.logOut = pw
	records := make(chan map[string]any, 1024)
	go func() {
		defer close(records)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var r map[string]any
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				select {
				case records <- r:
				default: // nobody reads any more: drop
				}
			}
		}
	}()
	done := make(chan error, 1)
	go func() {
		err := runServe(ctx, io.Discard, o)
		_ = pw.Close()
		done <- err
	}()
	return records, func() {
		cancel()
		require.NoError(t, <-done)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", url, b)
	return string(b)
}
