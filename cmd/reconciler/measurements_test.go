package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

func TestWriteLastMeasurementsSaysWhatWasMeasured(t *testing.T) {
	t.Parallel()
	at := time.Unix(1_800_000_000, 0)
	var b strings.Builder
	writeLastMeasurements(&b, map[string]any{"measurements": map[string][]release.Measurement{
		"error-rate": {{At: at, Result: map[string]any{"value": 0.001}}, {At: at, Result: map[string]any{"query": "q", "value": 0.25}}},
		"healthz":    {{At: at, Error: "http: probe: dial tcp: connection refused"}},
		"none":       {},
	}})
	require.Equal(t, `      error-rate (2 measured): last result {"query":"q","value":0.25}
      healthz (1 measured): last error: http: probe: dial tcp: connection refused
`, b.String())

	b.Reset()
	writeLastMeasurements(&b, map[string]any{"status": 200.0})
	writeLastMeasurements(&b, nil)
	require.Empty(t, b.String(), "no measurements, no lines")
}
