package main

import (
	"log/slog"

	"github.com/reconcilerhq/reconciler/adapters/simulated"
	"github.com/reconcilerhq/reconciler/ports"
)

// Stand-ins, as serve names them in its warning and in /readyz?verbose.
const (
	standInDemo       = "simulated (demo)"
	standInCodeRecord = "recording only (touches no pull request; set --github-token for GitHub)"
)

// runWorld is the outside world serve wires for the four run kinds.
type runWorld struct {
	agents ports.AgentRuntime
	code   ports.CodeHost
	// agentsStandIn and codeStandIn name the stand-ins behind agents and
	// code; empty for a real implementation.
	agentsStandIn, codeStandIn string
	close                      func()
}

// newRunWorld picks the run kinds' outside world: the demo's simulated
// world, or the real agent runtime with the real code host (github) when
// one is configured, else a code host that only records.
func newRunWorld(be *backend, clock ports.Clock, demo bool, agents ports.AgentRuntime, code ports.CodeHost) runWorld {
	if demo {
		sim := newDemoWorld(be.runs, be.queue, clock, demoStep)
		return runWorld{agents: sim, code: sim, agentsStandIn: standInDemo, codeStandIn: standInDemo, close: sim.Close}
	}
	w := runWorld{agents: agents, code: code, close: func() {}}
	if code == nil {
		w.code, w.codeStandIn = simulated.NewCodeHost(), standInCodeRecord
	}
	return w
}

// warn logs, at start, which of the run kinds' outside world is a stand-in.
func (w runWorld) warn(log *slog.Logger) {
	if w.agentsStandIn != "" || w.codeStandIn != "" {
		log.Warn("the run kinds run on stand-ins, not a real agent runtime and code host",
			"agent_runtime", w.name(w.agentsStandIn), "code_host", w.name(w.codeStandIn))
	}
}

// name is what /readyz and the warning call an implementation.
func (runWorld) name(standIn string) string {
	if standIn == "" {
		return "real"
	}
	return standIn
}

// detail is the /readyz line of the run kinds' outside world.
func (w runWorld) detail() string {
	return "agent runtime: " + w.name(w.agentsStandIn) + "; code host: " + w.name(w.codeStandIn)
}
