package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
)

// TestKlogGoesThroughSlog: what client-go logs through klog comes out of the
// process logger, as JSON when --log-format is json, not klog's own format.
// (Not parallel: klog's logger is process-global.)
func TestKlogGoesThroughSlog(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(&buf, "info", "json")
	require.NoError(t, err)
	routeKlog(log)
	t.Cleanup(klog.ClearLogger)
	klog.InfoS("watch restarted", "resource", "pods")
	klog.Flush()
	var line map[string]any
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &line), "one JSON line, got %q", buf.String())
	require.Equal(t, "watch restarted", line["msg"])
	require.Equal(t, "pods", line["resource"])
	require.Equal(t, "client-go", line["component"])
}
