package reconcile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/reconcilerhq/reconciler/internal/strictjson"
)

// The recorded-snapshot format is one JSON object: "kind" plus the kind's
// snapshot fields (see snapshot.go and docs/snapshot-format.md). These
// wrappers add "kind" to each snapshot type.
type (
	repoFile struct {
		Kind RunKind `json:"kind"`
		*RepoSnapshot
	}
	standaloneFile struct {
		Kind RunKind `json:"kind"`
		*StandaloneSnapshot
	}
	prReviewFile struct {
		Kind RunKind `json:"kind"`
		*PRReviewSnapshot
	}
	agentFile struct {
		Kind RunKind `json:"kind"`
		*AgentSnapshot
	}
)

// EncodeSnapshot renders s in the recorded-snapshot format that
// DecodeSnapshot and `reconciler decide` read.
func EncodeSnapshot(s Snapshot) ([]byte, error) {
	var v any
	switch s := s.(type) {
	case *RepoSnapshot:
		v = repoFile{KindRepo, s}
	case *StandaloneSnapshot:
		v = standaloneFile{KindStandalone, s}
	case *PRReviewSnapshot:
		v = prReviewFile{KindPRReview, s}
	case *AgentSnapshot:
		v = agentFile{KindPersistentAgent, s}
	default:
		return nil, fmt.Errorf("encode snapshot: unsupported type %T", s)
	}
	return json.Marshal(v)
}

// DecodeSnapshot parses a recorded snapshot strictly. Errors are
// *strictjson.Error values naming the field, and the line and column for
// syntax and type errors: unknown fields, a missing or unknown kind, missing
// required fields and states that are not states of the kind are refused.
func DecodeSnapshot(data []byte) (Snapshot, error) {
	var head struct {
		Kind *RunKind `json:"kind"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		// Report syntax errors with their position.
		var x map[string]json.RawMessage
		if err := strictjson.Decode(data, &x); err != nil {
			return nil, err
		}
		return nil, &strictjson.Error{Path: "kind", Msg: "must be a string"}
	}
	if head.Kind == nil {
		return nil, &strictjson.Error{Path: "kind", Msg: "required (one of repo, standalone, pr-review, persistent-agent)"}
	}
	var s Snapshot
	var err error
	switch *head.Kind {
	case KindRepo:
		x := &RepoSnapshot{}
		err, s = strictjson.Decode(data, &repoFile{RepoSnapshot: x}), x
	case KindStandalone:
		x := &StandaloneSnapshot{}
		err, s = strictjson.Decode(data, &standaloneFile{StandaloneSnapshot: x}), x
	case KindPRReview:
		x := &PRReviewSnapshot{}
		err, s = strictjson.Decode(data, &prReviewFile{PRReviewSnapshot: x}), x
	case KindPersistentAgent:
		x := &AgentSnapshot{}
		err, s = strictjson.Decode(data, &agentFile{AgentSnapshot: x}), x
	default:
		return nil, &strictjson.Error{Path: "kind", Msg: fmt.Sprintf("unknown kind %q (want repo, standalone, pr-review or persistent-agent)", *head.Kind)}
	}
	if err != nil {
		return nil, err
	}
	if i := bytes.Index(data, []byte(`\u0000`)); i >= 0 {
		line, col := strictjson.Position(data, int64(i))
		return nil, &strictjson.Error{Line: line, Column: col, Msg: "a string holds a NUL character (\\u0000), which no run id, name or message may"}
	}
	if err := Validate(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Validate checks the fields a decision cannot do without: now, run.id and
// a run.state that belongs to the kind.
func Validate(s Snapshot) error {
	w := s.Observed()
	if w.Now.IsZero() {
		return &strictjson.Error{Path: "now", Msg: "required (RFC 3339 time of the observation)"}
	}
	if s.Ref().ID == "" {
		return &strictjson.Error{Path: "run.id", Msg: "required"}
	}
	m := MachineFor(s.Ref().Kind)
	st := s.RunState()
	if st == "" {
		return &strictjson.Error{Path: "run.state", Msg: "required"}
	}
	if !m.IsState(st) {
		names := make([]string, len(m.States))
		for i, x := range m.States {
			names[i] = string(x)
		}
		return &strictjson.Error{Path: "run.state", Msg: fmt.Sprintf("%q is not a %s state (want one of %s)", st, m.Kind, strings.Join(names, ", "))}
	}
	if in := s.Controls().Intent; !in.Valid() {
		return &strictjson.Error{Path: "run.reconcile.control_intent", Msg: fmt.Sprintf("unknown intent %q", in)}
	}
	for _, c := range []struct {
		path string
		n    int
	}{{"capacity.global_active", w.Capacity.GlobalActive}, {"capacity.global_limit", w.Capacity.GlobalLimit},
		{"capacity.repo_active", w.Capacity.RepoActive}, {"capacity.repo_limit", w.Capacity.RepoLimit}} {
		if c.n < 0 {
			return &strictjson.Error{Path: c.path, Msg: fmt.Sprintf("must not be negative, got %d", c.n)}
		}
	}
	if a, ok := s.(*AgentSnapshot); ok && a.Run.PendingMessages < 0 {
		return &strictjson.Error{Path: "run.pending_messages", Msg: fmt.Sprintf("must not be negative, got %d", a.Run.PendingMessages)}
	}
	return nil
}

// EncodeAction renders a as a JSON object whose "type" member names it,
// followed by the action's fields.
func EncodeAction(a Action) ([]byte, error) {
	body, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("encode action %s: %w", a.Type(), err)
	}
	var b bytes.Buffer
	b.WriteString(`{"type":`)
	t, _ := json.Marshal(string(a.Type()))
	b.Write(t)
	if len(body) > 2 {
		b.WriteByte(',')
		b.Write(body[1:])
	} else {
		b.WriteByte('}')
	}
	return b.Bytes(), nil
}

// DecodeAction parses an action written by EncodeAction.
func DecodeAction(data []byte) (Action, error) {
	var head struct {
		Type ActionType `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("decode action: %w", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, fmt.Errorf("decode action: %w", err)
	}
	delete(fields, "type")
	rest, _ := json.Marshal(fields)
	into := func(v any) error { return strictjson.Decode(rest, v) }
	var a Action
	var err error
	switch head.Type {
	case TypeTransition:
		var x Transition
		err, a = into(&x), &x
	case TypePatchStatus:
		var x PatchStatus
		err, a = into(&x), &x
	case TypeLaunchReview:
		var x LaunchReview
		err, a = into(&x), &x
	case TypeAutoMergePR:
		var x AutoMergePR
		err, a = into(&x), &x
	case TypeResumeAgent:
		var x ResumeAgent
		err, a = into(&x), &x
	case TypeRequeueForAgent:
		var x RequeueForAgent
		err, a = into(&x), &x
	case TypeRequeueSoon:
		var x RequeueSoon
		err, a = into(&x), &x
	case TypeDeferWithBackoff:
		var x DeferWithBackoff
		err, a = into(&x), &x
	case TypeClearControlIntent:
		var x ClearControlIntent
		err, a = into(&x), &x
	case TypeEnqueueAgent:
		var x EnqueueAgent
		err, a = into(&x), &x
	case TypeLaunchReviewRun:
		var x LaunchReviewRun
		err, a = into(&x), &x
	case TypeSubmitReview:
		var x SubmitReview
		err, a = into(&x), &x
	case TypeMarkStale:
		var x MarkStale
		err, a = into(&x), &x
	case TypeEnqueueTurn:
		var x EnqueueTurn
		err, a = into(&x), &x
	case TypeReleasePod:
		var x ReleasePod
		err, a = into(&x), &x
	case TypeNoop:
		var x Noop
		err, a = into(&x), &x
	default:
		return nil, fmt.Errorf("decode action: unknown type %q", head.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("decode action %s: %w", head.Type, err)
	}
	return deref(a), nil
}

// deref turns the decoded pointer back into the value type decisions return.
func deref(a Action) Action {
	switch x := a.(type) {
	case *Transition:
		return *x
	case *PatchStatus:
		return *x
	case *LaunchReview:
		return *x
	case *AutoMergePR:
		return *x
	case *ResumeAgent:
		return *x
	case *RequeueForAgent:
		return *x
	case *RequeueSoon:
		return *x
	case *DeferWithBackoff:
		return *x
	case *ClearControlIntent:
		return *x
	case *EnqueueAgent:
		return *x
	case *LaunchReviewRun:
		return *x
	case *SubmitReview:
		return *x
	case *MarkStale:
		return *x
	case *EnqueueTurn:
		return *x
	case *ReleasePod:
		return *x
	case *Noop:
		return *x
	}
	return a
}

// Decision is what `reconciler decide` prints: the run, the action and why.
type Decision struct {
	Kind   RunKind         `json:"kind"`
	ID     string          `json:"id"`
	Action json.RawMessage `json:"action"`
	Reason string          `json:"reason"`
}

// NewDecision packages an action for output.
func NewDecision(ref RunRef, a Action) (Decision, error) {
	body, err := EncodeAction(a)
	if err != nil {
		return Decision{}, err
	}
	return Decision{Kind: ref.Kind, ID: ref.ID, Action: body, Reason: a.Why()}, nil
}

// ErrSnapshot reports whether err is a snapshot decoding problem (bad input,
// exit status 2 in the CLI) rather than an internal failure.
func ErrSnapshot(err error) bool {
	var e *strictjson.Error
	return errors.As(err, &e)
}
