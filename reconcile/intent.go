package reconcile

// IntentAction returns the action the kernel takes for control intent in on
// the run s observes: the same intent rule (precedence 2) of the kind's
// decision function, run on a copy of s carrying in. A ClearControlIntent
// means the kernel would refuse the intent (its Reason says why: e.g.
// "cancel-not-applicable", "intent-unsupported"); any other action is the
// one it would apply. Producers of intents (the API) ask it before storing
// an intent, so a refused one is reported at once instead of silently
// cleared by the next pass. Like Decide, it is pure.
func IntentAction(s Snapshot, in Intent) Action {
	if in == IntentNone {
		return Noop{Reason: "no-intent"}
	}
	switch s := s.(type) {
	case *RepoSnapshot:
		c := *s
		c.Run.Reconcile.Intent = in
		return repoIntent(&c)
	case *StandaloneSnapshot:
		c := *s
		c.Run.Reconcile.Intent = in
		return standaloneIntent(&c)
	case *PRReviewSnapshot:
		c := *s
		c.Run.Reconcile.Intent = in
		return prReviewIntent(&c)
	case *AgentSnapshot:
		c := *s
		c.Run.Reconcile.Intent = in
		return agentIntent(&c)
	}
	return Noop{Reason: "unknown-snapshot"}
}
