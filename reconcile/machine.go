package reconcile

// Edge is one allowed state change.
type Edge struct {
	From State `json:"from"`
	To   State `json:"to"`
}

// Machine is a kind's state machine as data: its states, the terminal ones
// and the allowed edges. The decision functions, the executor and the
// property tests all consult the same table.
type Machine struct {
	Kind     RunKind
	States   []State
	Terminal []State
	// Agent lists the states in which the run's agent runs and holds a
	// slot; a move out of them lets the pod go (ReleasesPod).
	Agent []State
	Edges []Edge
}

// Allowed reports whether from → to is an edge of the machine.
func (m *Machine) Allowed(from, to State) bool {
	for _, e := range m.Edges {
		if e.From == from && e.To == to {
			return true
		}
	}
	return false
}

// IsState reports whether s is a state of the machine.
func (m *Machine) IsState(s State) bool {
	for _, x := range m.States {
		if x == s {
			return true
		}
	}
	return false
}

// IsTerminal reports whether s is terminal: no decision leaves it except an
// allowed control intent.
func (m *Machine) IsTerminal(s State) bool {
	for _, x := range m.Terminal {
		if x == s {
			return true
		}
	}
	return false
}

// RunsAgent reports whether the run's agent runs (and holds an agent slot)
// in state s.
func (m *Machine) RunsAgent(s State) bool {
	for _, x := range m.Agent {
		if x == s {
			return true
		}
	}
	return false
}

// MachineFor returns the machine of kind k, or nil for an unknown kind.
func MachineFor(k RunKind) *Machine {
	switch k {
	case KindRepo:
		return &RepoMachine
	case KindStandalone:
		return &StandaloneMachine
	case KindPRReview:
		return &PRReviewMachine
	case KindPersistentAgent:
		return &AgentMachine
	}
	return nil
}

// RepoMachine is the state machine of repo runs.
var RepoMachine = Machine{
	Kind: KindRepo,
	States: []State{RepoPending, RepoWaitingOnDeps, RepoQueued, RepoProvisioning, RepoRunning,
		RepoNeedsAttention, RepoPROpened, RepoCompleted, RepoFailed, RepoCancelled},
	Terminal: []State{RepoCompleted, RepoFailed, RepoCancelled},
	Agent:    []State{RepoProvisioning, RepoRunning},
	Edges: []Edge{
		{RepoPending, RepoQueued}, {RepoPending, RepoWaitingOnDeps}, {RepoPending, RepoFailed}, {RepoPending, RepoCancelled},
		{RepoWaitingOnDeps, RepoQueued}, {RepoWaitingOnDeps, RepoFailed}, {RepoWaitingOnDeps, RepoCancelled},
		{RepoQueued, RepoProvisioning}, {RepoQueued, RepoCancelled},
		{RepoProvisioning, RepoRunning}, {RepoProvisioning, RepoFailed}, {RepoProvisioning, RepoCancelled},
		{RepoRunning, RepoPROpened}, {RepoRunning, RepoFailed}, {RepoRunning, RepoNeedsAttention}, {RepoRunning, RepoCompleted}, {RepoRunning, RepoCancelled},
		{RepoPROpened, RepoCompleted}, {RepoPROpened, RepoFailed}, {RepoPROpened, RepoNeedsAttention}, {RepoPROpened, RepoQueued}, {RepoPROpened, RepoCancelled},
		{RepoNeedsAttention, RepoQueued}, {RepoNeedsAttention, RepoCancelled}, {RepoNeedsAttention, RepoPROpened}, {RepoNeedsAttention, RepoCompleted}, {RepoNeedsAttention, RepoFailed},
		// Control intents on terminal states.
		{RepoFailed, RepoQueued}, {RepoCancelled, RepoQueued}, {RepoCompleted, RepoQueued},
	},
}

// StandaloneMachine is the state machine of standalone runs.
var StandaloneMachine = Machine{
	Kind:     KindStandalone,
	States:   []State{StandaloneQueued, StandaloneRunning, StandaloneCompleted, StandaloneFailed, StandaloneCancelled},
	Terminal: []State{StandaloneCompleted, StandaloneFailed, StandaloneCancelled},
	Agent:    []State{StandaloneRunning},
	Edges: []Edge{
		{StandaloneQueued, StandaloneRunning}, {StandaloneQueued, StandaloneFailed}, {StandaloneQueued, StandaloneCancelled},
		{StandaloneRunning, StandaloneCompleted}, {StandaloneRunning, StandaloneFailed}, {StandaloneRunning, StandaloneCancelled},
		// Automatic retry after backoff, and the retry/restart intents.
		{StandaloneFailed, StandaloneQueued}, {StandaloneCancelled, StandaloneQueued}, {StandaloneCompleted, StandaloneQueued},
	},
}

// PRReviewMachine is the state machine of pull-request review runs.
var PRReviewMachine = Machine{
	Kind:     KindPRReview,
	States:   []State{ReviewQueued, ReviewRunning, ReviewReady, ReviewSubmitted, ReviewStale, ReviewFailed, ReviewCancelled},
	Terminal: []State{ReviewSubmitted, ReviewStale, ReviewFailed, ReviewCancelled},
	Agent:    []State{ReviewRunning},
	Edges: []Edge{
		{ReviewQueued, ReviewRunning}, {ReviewQueued, ReviewStale}, {ReviewQueued, ReviewCancelled},
		{ReviewRunning, ReviewReady}, {ReviewRunning, ReviewFailed}, {ReviewRunning, ReviewQueued}, {ReviewRunning, ReviewStale}, {ReviewRunning, ReviewCancelled},
		{ReviewReady, ReviewSubmitted}, {ReviewReady, ReviewQueued}, {ReviewReady, ReviewStale}, {ReviewReady, ReviewCancelled},
		// A new head SHA re-runs a finished review when configured; rereview intent.
		{ReviewSubmitted, ReviewQueued}, {ReviewStale, ReviewQueued}, {ReviewFailed, ReviewQueued}, {ReviewCancelled, ReviewQueued},
	},
}

// AgentMachine is the state machine of persistent agents.
var AgentMachine = Machine{
	Kind:     KindPersistentAgent,
	States:   []State{AgentIdle, AgentQueued, AgentProvisioning, AgentRunning, AgentPaused, AgentFailed, AgentArchived},
	Terminal: []State{AgentArchived},
	Agent:    []State{AgentProvisioning, AgentRunning},
	Edges: []Edge{
		{AgentIdle, AgentQueued}, {AgentIdle, AgentPaused}, {AgentIdle, AgentArchived},
		{AgentQueued, AgentProvisioning}, {AgentQueued, AgentIdle}, {AgentQueued, AgentPaused}, {AgentQueued, AgentArchived},
		{AgentProvisioning, AgentRunning}, {AgentProvisioning, AgentIdle}, {AgentProvisioning, AgentFailed}, {AgentProvisioning, AgentPaused}, {AgentProvisioning, AgentArchived},
		{AgentRunning, AgentIdle}, {AgentRunning, AgentFailed}, {AgentRunning, AgentPaused}, {AgentRunning, AgentArchived},
		{AgentPaused, AgentIdle}, {AgentPaused, AgentArchived},
		{AgentFailed, AgentIdle}, {AgentFailed, AgentArchived},
	},
}
