package benchstat

import (
	"context"
	"time"
)

// settleTimeout bounds how long a Meter waits for the measured connections
// to end.
const settleTimeout = 30 * time.Second

// Meter measures the server-side cost of one timed span of the connections
// that carry application name app. The caller closes all of them before
// Start and before Stop, so the server has counted everything they did.
type Meter struct {
	q        Querier
	app      string
	settings Settings
	before   Counters
	// cpu and serverCPU are the CPU times at Start (see ProcessCPU and
	// ServerCPU); serverOK says whether the server's could be read.
	cpu, serverCPU time.Duration
	serverOK       bool
}

// NewMeter reads the server's settings through q, a connection whose
// application name is not app.
func NewMeter(ctx context.Context, q Querier, app string) (*Meter, error) {
	s, err := ReadSettings(ctx, q)
	if err != nil {
		return nil, err
	}
	return &Meter{q: q, app: app, settings: s}, nil
}

// Settings are the server's durability settings.
func (m *Meter) Settings() Settings { return m.settings }

// Start reads the counters the span starts from, once app's connections
// are gone.
func (m *Meter) Start(ctx context.Context) error {
	if err := Settle(ctx, m.q, m.app, settleTimeout); err != nil {
		return err
	}
	c, err := Read(ctx, m.q)
	if err != nil {
		return err
	}
	m.before = c
	m.serverCPU, m.serverOK = ServerCPU(ctx, m.q)
	m.cpu = ProcessCPU()
	return nil
}

// Stop reads the counters the span ends at, once app's connections are
// gone, and returns the span's figures (see Fields) for units units of
// work, with the process's peak RSS as max_rss_mb, and the CPU time per
// unit over the span of this process (cpu_us_per_unit, see ProcessCPU)
// and, when it runs on this host, of the PostgreSQL cluster
// (server_cpu_us_per_unit, see ServerCPU). On a machine whose cores are
// all busy these say what a unit costs where seconds do not.
func (m *Meter) Stop(ctx context.Context, unit string, units int64) (map[string]any, error) {
	cpu := ProcessCPU() - m.cpu
	if err := Settle(ctx, m.q, m.app, settleTimeout); err != nil {
		return nil, err
	}
	serverCPU, serverOK := ServerCPU(ctx, m.q)
	after, err := Read(ctx, m.q)
	if err != nil {
		return nil, err
	}
	f := Fields(unit, units, m.before, after, m.settings)
	f["max_rss_mb"] = MaxRSSMB()
	if units > 0 {
		f["cpu_us_per_unit"] = round(float64(cpu.Microseconds()) / float64(units))
		if m.serverOK && serverOK {
			f["server_cpu_us_per_unit"] = round(float64((serverCPU - m.serverCPU).Microseconds()) / float64(units))
		}
	}
	return f, nil
}
