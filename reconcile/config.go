package reconcile

import (
	"fmt"
	"strconv"
	"time"
)

// Config holds the engine-wide knobs of the reconciler. cmd/ binds each to a
// flag and a RECONCILER_* environment variable (flag > env > default).
type Config struct {
	// Concurrency is the number of reconcile passes run in parallel per kind.
	Concurrency int
	// LockDuration is the lease on a work item; a runaway pass loses it.
	LockDuration time.Duration
	// ResyncInterval is the cadence of the full sweep of non-terminal runs.
	ResyncInterval time.Duration
	// StallThreshold is the default heartbeat staleness threshold.
	StallThreshold time.Duration
	// MaxAutoResumes caps automatic resumes between manual actions.
	MaxAutoResumes int
	// UnknownPodGrace is how long a pod may stay in the unknown phase before
	// the run counts it as lost.
	UnknownPodGrace time.Duration
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Concurrency:     4,
		LockDuration:    30 * time.Second,
		ResyncInterval:  5 * time.Minute,
		StallThreshold:  15 * time.Minute,
		MaxAutoResumes:  10,
		UnknownPodGrace: defaultUnknownPodGrace,
	}
}

// EnvVar documents one environment variable of Config.
type EnvVar struct {
	Name    string
	Default string
	Purpose string
}

// ConfigEnv lists the environment variables Config reads, mirroring the
// design source's table.
var ConfigEnv = []EnvVar{
	{"RECONCILER_CONCURRENCY", "4", "Parallel reconcile passes per kind"},
	{"RECONCILER_LOCK", "30s", "Work-item lease; a runaway pass loses its lease"},
	{"RECONCILER_RESYNC_INTERVAL", "5m", "Full sweep cadence for non-terminal runs"},
	{"RECONCILER_STALL_THRESHOLD", "15m", "Heartbeat staleness threshold"},
	{"RECONCILER_MAX_AUTO_RESUMES", "10", "Cap on automatic resumes between manual actions"},
	{"RECONCILER_UNKNOWN_POD_GRACE", "5m", "How long a pod may stay in the unknown phase before it counts as lost"},
}

// ConfigFromEnv overlays the RECONCILER_* variables found by lookup (e.g.
// os.LookupEnv) on the defaults. An unparsable value is an error naming the
// variable.
func ConfigFromEnv(lookup func(string) (string, bool)) (Config, error) {
	c := DefaultConfig()
	ints := map[string]*int{
		"RECONCILER_CONCURRENCY":      &c.Concurrency,
		"RECONCILER_MAX_AUTO_RESUMES": &c.MaxAutoResumes,
	}
	durs := map[string]*time.Duration{
		"RECONCILER_LOCK":              &c.LockDuration,
		"RECONCILER_RESYNC_INTERVAL":   &c.ResyncInterval,
		"RECONCILER_STALL_THRESHOLD":   &c.StallThreshold,
		"RECONCILER_UNKNOWN_POD_GRACE": &c.UnknownPodGrace,
	}
	for name, p := range ints {
		if v, ok := lookup(name); ok && v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return c, fmt.Errorf("%s: want a positive integer, got %q", name, v)
			}
			*p = n
		}
	}
	for name, p := range durs {
		if v, ok := lookup(name); ok && v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return c, fmt.Errorf("%s: want a positive duration like 30s, got %q", name, v)
			}
			*p = d
		}
	}
	return c, nil
}

// ApplyDefaults fills the settings a snapshot left at zero from c, so a
// snapshot builder hands decisions explicit values.
func (c Config) ApplyDefaults(s *Settings) {
	if s.StallThreshold <= 0 {
		s.StallThreshold = Duration(c.StallThreshold)
	}
	if s.MaxAutoResumes <= 0 {
		s.MaxAutoResumes = c.MaxAutoResumes
	}
	if s.UnknownPodGrace <= 0 && c.UnknownPodGrace > 0 {
		s.UnknownPodGrace = Duration(c.UnknownPodGrace)
	}
}
