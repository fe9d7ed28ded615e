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
	return nil
}

// Stop reads the counters the span ends at, once app's connections are
// gone, and returns the span's figures (see Fields) for units units of
// work, with the process's peak RSS as max_rss_mb.
func (m *Meter) Stop(ctx context.Context, unit string, units int64) (map[string]any, error) {
	if err := Settle(ctx, m.q, m.app, settleTimeout); err != nil {
		return nil, err
	}
	after, err := Read(ctx, m.q)
	if err != nil {
		return nil, err
	}
	f := Fields(unit, units, m.before, after, m.settings)
	f["max_rss_mb"] = MaxRSSMB()
	return f, nil
}
