package reconcile

// ReleasesPod reports whether applying a to the run s observes lets the
// run's pod go: the executor releases it (stopping whatever still runs in
// it) before it writes the action. That is the case for ReleasePod, for
// every move out of a state in which the kind's agent runs (Machine.Agent)
// into one where it does not (the agent finished, failed, stalled, timed
// out, or was cancelled, paused or archived), and for pausing or archiving
// a persistent agent that holds a pod between turns (PodHeld).
func ReleasesPod(s Snapshot, a Action) bool {
	if _, ok := a.(ReleasePod); ok {
		return true
	}
	mv, ok := a.(Moving)
	if !ok {
		return false
	}
	e := mv.Move()
	m := MachineFor(s.Ref().Kind)
	if m == nil {
		return false
	}
	if m.RunsAgent(e.From) && !m.RunsAgent(e.To) {
		return true
	}
	if as, ok := s.(*AgentSnapshot); ok && as.Run.PodHeld {
		return e.To == AgentPaused || e.To == AgentArchived
	}
	return false
}
