package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/ports"
)

// describer is a prometheus.Registerer that records the names of the
// metrics its collectors describe.
type describer struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names[m[1]] = true
		}
	}
	return nil
}

func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d *describer) Unregister(prometheus.Collector) bool { return false }

// TestDashboardQueriesExportedMetrics: every reconciler_* metric the
// Grafana dashboard queries is one serve exports (histograms by their
// _bucket, _sum and _count series), and the dashboard shows each of them.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	t.Parallel()
	d := &describer{names: map[string]bool{}}
	registerMetrics(d, memory.NewQueue(ports.SystemClock), ports.SystemClock, nil)
	raw, err := os.ReadFile("../../deploy/grafana/reconciler.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	used := map[string]bool{}
	name := regexp.MustCompile(`\breconciler_[a-z_]+`)
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, "panel %q queries nothing", p.Title)
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				base := m
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if s, ok := strings.CutSuffix(m, suf); ok && d.names[s] {
						base = s
					}
				}
				require.True(t, d.names[base], "panel %q queries %s, which serve does not export", p.Title, m)
				used[base] = true
			}
		}
	}
	for n := range d.names {
		if strings.HasPrefix(n, "reconciler_") {
			require.True(t, used[n], "the dashboard shows no panel of %s", n)
		}
	}
}
