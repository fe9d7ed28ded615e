package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// RunCreate is a new run. Fields that do not apply to the kind must be
// left out.
type RunCreate struct {
	Kind reconcile.RunKind `json:"kind" enum:"repo,standalone,pr-review,persistent-agent"`
	ID   string            `json:"id" doc:"1 to 255 letters, digits, '.', '_' or '-'"`
	// Repo is required for repo runs.
	Repo       string             `json:"repo,omitempty" doc:"repo runs: the repository the agent works in (required)"`
	Workflow   string             `json:"workflow,omitempty" doc:"standalone runs: the workflow (required)"`
	PRURL      string             `json:"pr_url,omitempty" doc:"pr-review runs: the pull request to review (required)"`
	MaxRetries int                `json:"max_retries,omitempty" minimum:"0" maximum:"100" doc:"repo and standalone runs: how often the retry intent may re-queue it"`
	DependsOn  []string           `json:"depends_on,omitempty" maxItems:"100" doc:"repo runs: repo runs this one waits for"`
	Settings   reconcile.Settings `json:"settings,omitzero" doc:"the run's knobs; zero fields take the engine defaults"`
}

// RunSettings documents the JSON shape of a run's settings
// (reconcile.Settings); every field is optional, zero taking the engine
// default, and durations are Go duration strings ("15m").
type RunSettings struct {
	StallThreshold   string                  `json:"stall_threshold,omitempty" doc:"heartbeat age that counts as stalled (default 15m)"`
	UnknownPodGrace  string                  `json:"unknown_pod_grace,omitempty" doc:"how long a pod may stay unknown (default 5m)"`
	AutoMerge        bool                    `json:"auto_merge,omitempty"`
	Cautious         bool                    `json:"cautious,omitempty" doc:"disables auto-merge"`
	AutoResume       bool                    `json:"auto_resume,omitempty"`
	MaxAutoResumes   int                     `json:"max_auto_resumes,omitempty" minimum:"0"`
	ReviewEnabled    bool                    `json:"review_enabled,omitempty"`
	ReviewTrigger    reconcile.ReviewTrigger `json:"review_trigger,omitempty" enum:"on_ci_pass,on_pr_open"`
	OffPeak          *reconcile.OffPeak      `json:"off_peak,omitempty"`
	WorkflowDisabled bool                    `json:"workflow_disabled,omitempty"`
	RetryBackoff     string                  `json:"retry_backoff,omitempty"`
	RerunOnPush      bool                    `json:"rerun_on_push,omitempty"`
	MaxReruns        int                     `json:"max_reruns,omitempty" minimum:"0"`
	PodLifecycle     reconcile.PodLifecycle  `json:"pod_lifecycle,omitempty" enum:"always-on,sticky,on-demand"`
	KeepWarm         string                  `json:"keep_warm,omitempty"`
	MaxTurnDuration  string                  `json:"max_turn_duration,omitempty"`
	FailureLimit     int                     `json:"failure_limit,omitempty" minimum:"0"`
}

// RunView is a run with its newest decisions.
type RunView struct {
	ports.RunRow
	// Decisions are the run's newest recorded decisions, newest first.
	Decisions []ports.RunDecision `json:"decisions" nullable:"false"`
}

// RunIntent asks a control intent.
type RunIntent struct {
	Intent reconcile.Intent `json:"intent" enum:"cancel,retry,resume,restart,rereview,pause,archive"`
}

// RunIntentResult is a stored intent and what the kernel will do with it.
type RunIntentResult struct {
	Run ports.RunRow `json:"run"`
	// Next is the action the next pass takes for the intent.
	Next RunNext `json:"next"`
}

// RunNext is the action a pass will take: its type, reason and move.
type RunNext struct {
	Action string          `json:"action"`
	Reason string          `json:"reason"`
	From   reconcile.State `json:"from,omitempty"`
	To     reconcile.State `json:"to,omitempty"`
}

// RunMessage is a message to a persistent agent.
type RunMessage struct {
	Text string `json:"text" minLength:"1" maxLength:"4096"`
}

// RunSubtask sets a subtask of a repo run.
type RunSubtask struct {
	// Blocking: the subtask must complete before the run's pull request
	// may be merged automatically.
	Blocking bool `json:"blocking"`
}

// RunSubtaskPath names a subtask of a run in a path.
type RunSubtaskPath struct {
	RunPath
	Child string `path:"child" maxLength:"255"`
}

// RunPath names a run in a path.
type RunPath struct {
	Kind reconcile.RunKind `path:"kind" enum:"repo,standalone,pr-review,persistent-agent"`
	ID   string            `path:"id"`
}

func (p *RunPath) ref() reconcile.RunRef { return reconcile.RunRef{Kind: p.Kind, ID: p.ID} }

func (s *Server) registerRuns() {
	create := s.op("createRun", http.MethodPost, "/runs", "Create a run of one of the four kinds in its initial state (repo: pending, persistent-agent: idle, others: queued) and wake it", ports.ScopeWrite, "runs")
	create.DefaultStatus = http.StatusCreated
	huma.Register(s.api, create, func(ctx context.Context, in *struct{ Body RunCreate }) (*body[ports.RunRow], error) {
		b := in.Body
		row, err := s.o.Runs.Create(ctx, runs.CreateParams{Kind: b.Kind, ID: b.ID, Repo: b.Repo, Workflow: b.Workflow, PRURL: b.PRURL,
			MaxRetries: b.MaxRetries, DependsOn: b.DependsOn, Settings: b.Settings})
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		return reply(row), nil
	})
	huma.Register(s.api, s.op("listRuns", http.MethodGet, "/runs", "List runs by kind (in the order repo, standalone, pr-review, persistent-agent) and id", ports.ScopeRead, "runs"),
		func(ctx context.Context, in *struct {
			Kind  reconcile.RunKind `query:"kind" enum:"repo,standalone,pr-review,persistent-agent" doc:"only runs of this kind"`
			State reconcile.State   `query:"state" doc:"only runs in this state"`
			PageParams
		}) (*body[Page[ports.RunRow]], error) {
			return s.listRuns(ctx, in.Kind, in.State, &in.PageParams)
		})
	huma.Register(s.api, s.op("getRun", http.MethodGet, "/runs/{kind}/{id}", "Read a run with its newest decisions (action, reason, from → to, time, and who asked an intent or sent a message)", ports.ScopeRead, "runs"),
		func(ctx context.Context, in *struct {
			RunPath
			Decisions int `query:"decisions" minimum:"0" maximum:"50" default:"20" doc:"how many of the newest decisions to include"`
		}) (*body[RunView], error) {
			row, err := s.o.Runs.Store.RunGet(ctx, in.ref())
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			v := RunView{RunRow: row, Decisions: []ports.RunDecision{}}
			if in.Decisions > 0 {
				d, err := s.o.Runs.Store.RunDecisions(ctx, in.ref(), in.Decisions)
				if err != nil {
					return nil, s.fail(ctx, err)
				}
				v.Decisions = append(v.Decisions, d...)
			}
			return reply(v), nil
		})
	intent := s.op("runIntent", http.MethodPost, "/runs/{kind}/{id}/intents",
		"Ask a control intent (cancel, retry, resume, restart, rereview, pause, archive), recorded with the caller; "+
			"an intent the kernel's rules refuse for the run's kind and state, or a second one while another is pending, is 409 with the reason", ports.ScopeWrite, "runs")
	intent.DefaultStatus = http.StatusAccepted
	huma.Register(s.api, intent, func(ctx context.Context, in *struct {
		RunPath
		Body RunIntent
	}) (*body[RunIntentResult], error) {
		row, a, err := s.o.Runs.Intent(ctx, in.ref(), in.Body.Intent, principal(ctx).Name)
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		next := RunNext{Action: string(a.Type()), Reason: a.Why()}
		if m, ok := a.(reconcile.Moving); ok {
			e := m.Move()
			next.From, next.To = e.From, e.To
		}
		return reply(RunIntentResult{Run: row, Next: next}), nil
	})
	setSub := s.op("setRunSubtask", http.MethodPut, "/runs/{kind}/{id}/subtasks/{child}",
		"Make repo run child a subtask of this repo run, blocking (it must complete before the run's pull request is merged automatically) or not; "+
			"setting it again changes its blocking flag. Recorded in the run's decisions with the caller", ports.ScopeWrite, "runs")
	huma.Register(s.api, setSub, func(ctx context.Context, in *struct {
		RunSubtaskPath
		Body RunSubtask
	}) (*body[ports.RunRow], error) {
		row, err := s.o.Runs.SetSubtask(ctx, in.ref(), in.Child, in.Body.Blocking, principal(ctx).Name)
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		return reply(row), nil
	})
	huma.Register(s.api, s.op("removeRunSubtask", http.MethodDelete, "/runs/{kind}/{id}/subtasks/{child}",
		"Remove a subtask from a repo run (a subtask that is not there changes nothing); recorded in the run's decisions with the caller", ports.ScopeWrite, "runs"),
		func(ctx context.Context, in *RunSubtaskPath) (*body[ports.RunRow], error) {
			row, err := s.o.Runs.RemoveSubtask(ctx, in.ref(), in.Child, principal(ctx).Name)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			return reply(row), nil
		})
	msg := s.op("runMessage", http.MethodPost, "/runs/{kind}/{id}/messages",
		"Send a message to a persistent agent: kept in its inbox (the newest 10), counted as pending, and the agent starts a turn; an archived agent refuses it (409)", ports.ScopeWrite, "runs")
	msg.DefaultStatus = http.StatusAccepted
	huma.Register(s.api, msg, func(ctx context.Context, in *struct {
		RunPath
		Body RunMessage
	}) (*body[ports.RunRow], error) {
		if in.Kind != reconcile.KindPersistentAgent {
			return nil, invalid("path.kind", "messages go to persistent-agent runs only, not "+string(in.Kind))
		}
		row, err := s.o.Runs.Message(ctx, in.ref(), in.Body.Text, principal(ctx).Name)
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		return reply(row), nil
	})
}

// listRuns pages through the runs of kind (every kind when empty, in the
// order of reconcile.Kinds); the cursor is KIND/ID of the last run shown.
func (s *Server) listRuns(ctx context.Context, kind reconcile.RunKind, state reconcile.State, pp *PageParams) (*body[Page[ports.RunRow]], error) {
	kinds := reconcile.Kinds
	if kind != "" {
		kinds = []reconcile.RunKind{kind}
	}
	if state != "" {
		known := false
		for _, k := range kinds {
			known = known || reconcile.MachineFor(k).IsState(state)
		}
		if !known {
			return nil, huma.Error422UnprocessableEntity("unknown state", &huma.ErrorDetail{Location: "query.state",
				Message: "not a state of " + kindNames(kinds), Value: state})
		}
	}
	after, err := pp.after()
	if err != nil {
		return nil, err
	}
	afterKind, afterID := kinds[0], ""
	if after != "" {
		k, id, ok := strings.Cut(after, "/")
		if !ok || !reconcile.RunKind(k).Valid() {
			return nil, huma.Error400BadRequest("bad cursor", &huma.ErrorDetail{Location: "query.cursor", Message: "not a cursor this API returned", Value: pp.Cursor})
		}
		afterKind, afterID = reconcile.RunKind(k), id
	}
	limit := pp.limit()
	var rows []ports.RunRow
	started := false
	for _, k := range kinds {
		if !started && k != afterKind {
			continue
		}
		from := ""
		if !started {
			from, started = afterID, true
		}
		if !reconcile.MachineFor(k).IsState(state) && state != "" {
			continue
		}
		got, err := s.o.Runs.Store.RunList(ctx, ports.RunListParams{Kind: k, State: state, AfterID: from, Limit: limit + 1 - len(rows)})
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		rows = append(rows, got...)
		if len(rows) > limit {
			break
		}
	}
	if !started {
		return nil, huma.Error400BadRequest("bad cursor", &huma.ErrorDetail{Location: "query.cursor", Message: "the cursor's kind is not listed", Value: pp.Cursor})
	}
	return reply(page(rows, limit, func(r *ports.RunRow) string { return string(r.Ref.Kind) + "/" + r.Ref.ID })), nil
}

// kindNames lists kinds for a message.
func kindNames(kinds []reconcile.RunKind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}
