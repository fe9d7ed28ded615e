package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Control is the operators' side of runs: create a run, ask a control
// intent, send a message to a persistent agent. Every write wakes the run
// (its work item is enqueued), and intents and messages are recorded in the
// run's decision history with who asked.
//
// An intent is judged before it is stored, by the kernel's own intent rule
// (reconcile.IntentAction) on the stored run: one the kernel would refuse
// is an *IntentRefusedError (ports.ErrConflict) and changes nothing. It is
// stored with a compare-and-swap against the version it was judged on.
type Control struct {
	Store ports.RunStore
	Queue ports.Queue
	Clock ports.Clock
}

// Limits of what Control accepts.
const (
	// MaxMessageBytes caps one message's text.
	MaxMessageBytes = 4 << 10
	// maxCASAttempts bounds the retries of a write that lost its
	// compare-and-swap to a concurrent observation.
	maxCASAttempts = 5
)

// ActionIntent, ActionMessage and ActionSubtask are the history actions
// of an operator's requests.
const (
	ActionIntent  = "intent"
	ActionMessage = "message"
	ActionSubtask = "subtask"
)

// MaxSubtasks caps a repo run's subtasks.
const MaxSubtasks = 100

// runID is what a run id may be: it names the agent's working directory
// and a path segment of the API.
var runID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$`)

// InitialState is the state a new run of kind starts in: pending for a
// repo run (it checks its dependencies first), idle for a persistent agent,
// queued for the others.
func InitialState(kind reconcile.RunKind) reconcile.State {
	switch kind {
	case reconcile.KindRepo:
		return reconcile.RepoPending
	case reconcile.KindPersistentAgent:
		return reconcile.AgentIdle
	}
	return reconcile.StandaloneQueued // also reconcile.ReviewQueued
}

// CreateParams describe a new run. Fields that do not apply to Kind must
// be empty.
type CreateParams struct {
	Kind reconcile.RunKind
	ID   string
	// Repo groups repo runs for per-repo capacity and names the repository
	// the agent works in (required for repo runs).
	Repo string
	// Workflow names a standalone run's workflow (required for standalone).
	Workflow string
	// PRURL is the pull request a pr-review run reviews (required there).
	PRURL string
	// MaxRetries bounds the retry intent of repo and standalone runs.
	MaxRetries int
	// DependsOn lists repo runs this repo run waits for.
	DependsOn []string
	Settings  reconcile.Settings
}

// Create stores a new run in its kind's initial state and wakes it. Bad
// input is a *release.FieldError naming the field; a taken id is
// ports.ErrConflict.
func (c *Control) Create(ctx context.Context, p CreateParams) (ports.RunRow, error) {
	if err := validateCreate(&p); err != nil {
		return ports.RunRow{}, fmt.Errorf("create run: %w", err)
	}
	// A dependency that does not exist would fail the run at once: refuse
	// it here, naming it.
	for i, d := range p.DependsOn {
		_, err := c.Store.RunGet(ctx, reconcile.RunRef{Kind: reconcile.KindRepo, ID: d})
		if errors.Is(err, ports.ErrNotFound) {
			return ports.RunRow{}, fmt.Errorf("create run: %w", release.Invalid(release.Index("depends_on", i), fmt.Sprintf("repo run %q does not exist", d)))
		}
		if err != nil {
			return ports.RunRow{}, fmt.Errorf("create run: depends_on %s: %w", d, err)
		}
	}
	var body any
	switch p.Kind {
	case reconcile.KindRepo:
		body = reconcile.RepoRun{Repo: p.Repo, MaxRetries: p.MaxRetries}
	case reconcile.KindStandalone:
		body = reconcile.StandaloneRun{Workflow: p.Workflow, MaxRetries: p.MaxRetries}
	case reconcile.KindPRReview:
		body = reconcile.PRReviewRun{PRURL: p.PRURL}
	case reconcile.KindPersistentAgent:
		body = reconcile.AgentRun{}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return ports.RunRow{}, fmt.Errorf("create run: %w", err)
	}
	ref := reconcile.RunRef{Kind: p.Kind, ID: p.ID}
	row, err := c.Store.RunCreate(ctx, ports.RunRow{Ref: ref, State: InitialState(p.Kind), Repo: p.Repo, Body: b,
		Settings: p.Settings, DependsOn: p.DependsOn})
	if err != nil {
		return ports.RunRow{}, err
	}
	if err := c.wake(ctx, ref); err != nil {
		return ports.RunRow{}, err
	}
	return row, nil
}

// validateCreate checks p, naming the field.
func validateCreate(p *CreateParams) error {
	if !p.Kind.Valid() {
		return release.Invalid("kind", fmt.Sprintf("%q is not a run kind (want repo, standalone, pr-review or persistent-agent)", p.Kind))
	}
	if err := checkRunID("id", p.ID); err != nil {
		return err
	}
	only := func(field string, set bool, kinds ...reconcile.RunKind) error {
		for _, k := range kinds {
			if k == p.Kind {
				return nil
			}
		}
		if set {
			return release.Invalid(field, "does not apply to "+string(p.Kind)+" runs")
		}
		return nil
	}
	required := func(field, v string) error {
		if v == "" {
			return release.Invalid(field, "is required for "+string(p.Kind)+" runs")
		}
		return checkText(field, v, release.MaxNameLength)
	}
	for _, err := range []error{
		only("repo", p.Repo != "", reconcile.KindRepo),
		only("workflow", p.Workflow != "", reconcile.KindStandalone),
		only("pr_url", p.PRURL != "", reconcile.KindPRReview),
		only("max_retries", p.MaxRetries != 0, reconcile.KindRepo, reconcile.KindStandalone),
		only("depends_on", len(p.DependsOn) > 0, reconcile.KindRepo),
	} {
		if err != nil {
			return err
		}
	}
	switch p.Kind {
	case reconcile.KindRepo:
		if err := required("repo", p.Repo); err != nil {
			return err
		}
	case reconcile.KindStandalone:
		if err := required("workflow", p.Workflow); err != nil {
			return err
		}
	case reconcile.KindPRReview:
		if err := required("pr_url", p.PRURL); err != nil {
			return err
		}
	}
	if p.MaxRetries < 0 || p.MaxRetries > 100 {
		return release.Invalid("max_retries", "must be between 0 and 100")
	}
	if len(p.DependsOn) > 100 {
		return release.Invalid("depends_on", "at most 100 runs")
	}
	for i, d := range p.DependsOn {
		if err := checkRunID(release.Index("depends_on", i), d); err != nil {
			return err
		}
		if d == p.ID {
			return release.Invalid(release.Index("depends_on", i), "a run cannot depend on itself")
		}
	}
	return nil
}

// checkRunID checks a run id against runID.
func checkRunID(field, id string) error {
	if id == "" {
		return release.Invalid(field, "is required")
	}
	if !runID.MatchString(id) {
		return release.Invalid(field, "must be 1 to 255 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	return nil
}

// checkText refuses text longer than max bytes, invalid UTF-8 and control
// characters other than newline and tab.
func checkText(field, v string, max int) error {
	if len(v) > max {
		return release.Invalid(field, fmt.Sprintf("is %d bytes long; at most %d", len(v), max))
	}
	if !utf8.ValidString(v) {
		return release.Invalid(field, "is not valid UTF-8")
	}
	for i, r := range v {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return release.Invalid(field, fmt.Sprintf("contains the control character %U at byte %d", r, i))
		}
	}
	return nil
}

// IntentRefusedError says the kernel would not apply an intent to the run
// in its current state (or another intent is still pending).
type IntentRefusedError struct {
	Ref    reconcile.RunRef
	Intent reconcile.Intent
	State  reconcile.State
	// Reason is the kernel's reason (e.g. "cancel-not-applicable").
	Reason string
}

func (e *IntentRefusedError) Error() string {
	return fmt.Sprintf("intent %s refused for %s in state %s: %s", e.Intent, e.Ref, e.State, e.Reason)
}

// Unwrap makes the refusal a conflict.
func (e *IntentRefusedError) Unwrap() error { return ports.ErrConflict }

// Intent stores control intent in on the run, recorded as asked by by, and
// wakes the run; the next pass applies it. It returns the stored run and
// the action the kernel will take. Asking the intent already pending
// changes nothing and succeeds.
func (c *Control) Intent(ctx context.Context, ref reconcile.RunRef, in reconcile.Intent, by string) (ports.RunRow, reconcile.Action, error) {
	if !in.Valid() || in == reconcile.IntentNone {
		return ports.RunRow{}, nil, release.Invalid("intent", fmt.Sprintf("%q is not an intent (want cancel, retry, resume, restart, rereview, pause or archive)", in))
	}
	var action reconcile.Action
	row, err := c.update(ctx, ref, func(row ports.RunRow, snap reconcile.Snapshot) (*ports.RunDecision, error) {
		ctl := snap.Controls()
		action = reconcile.IntentAction(snap, in)
		if ctl.Intent == in {
			return nil, nil
		}
		if ctl.Intent != reconcile.IntentNone {
			return nil, &IntentRefusedError{Ref: ref, Intent: in, State: row.State, Reason: "intent " + string(ctl.Intent) + " is still pending"}
		}
		if cl, refused := action.(reconcile.ClearControlIntent); refused {
			return nil, &IntentRefusedError{Ref: ref, Intent: in, State: row.State, Reason: cl.Reason}
		}
		return &ports.RunDecision{Action: ActionIntent, Reason: string(in), By: by}, setIntent(snap, in)
	})
	if err != nil {
		return ports.RunRow{}, nil, err
	}
	return row, action, nil
}

// Message appends a message from by to a persistent agent's inbox (keeping
// the newest reconcile.MaxInbox), counts it as pending and wakes the agent,
// which starts a turn from idle; a message sent while a turn runs stays
// pending past that turn's end and starts the next one (the turn's end reads
// only the messages it was enqueued for). An archived agent refuses messages
// (ports.ErrConflict); other kinds take none (a *release.FieldError on
// "kind").
func (c *Control) Message(ctx context.Context, ref reconcile.RunRef, text, by string) (ports.RunRow, error) {
	if ref.Kind != reconcile.KindPersistentAgent {
		return ports.RunRow{}, release.Invalid("kind", "messages go to persistent-agent runs only, not "+string(ref.Kind))
	}
	if text == "" {
		return ports.RunRow{}, release.Invalid("text", "is required")
	}
	if err := checkText("text", text, MaxMessageBytes); err != nil {
		return ports.RunRow{}, err
	}
	return c.update(ctx, ref, func(row ports.RunRow, snap reconcile.Snapshot) (*ports.RunDecision, error) {
		s, ok := snap.(*reconcile.AgentSnapshot)
		if !ok {
			return nil, fmt.Errorf("message %s: snapshot %T", ref, snap)
		}
		if row.State == reconcile.AgentArchived {
			return nil, fmt.Errorf("message %s: the agent is archived: %w", ref, ports.ErrConflict)
		}
		r := &s.Run
		r.Inbox = append(r.Inbox, reconcile.AgentMessage{At: ports.StoredTime(c.Clock.Now()), By: by, Text: text})
		if len(r.Inbox) > reconcile.MaxInbox {
			r.Inbox = r.Inbox[len(r.Inbox)-reconcile.MaxInbox:]
		}
		r.PendingMessages = min(r.PendingMessages+1, reconcile.MaxInbox)
		return &ports.RunDecision{Action: ActionMessage, Reason: "message", By: by}, nil
	})
}

// SetSubtask makes repo run child a subtask of repo run parent, blocking
// (its completion gates the parent's auto-merge) or not, recorded as asked
// by by, and wakes the parent; setting it again changes its blocking flag.
// Bad input is a *release.FieldError naming the field; a child that does
// not exist is one on "child".
func (c *Control) SetSubtask(ctx context.Context, parent reconcile.RunRef, child string, blocking bool, by string) (ports.RunRow, error) {
	if err := checkSubtask(parent, child); err != nil {
		return ports.RunRow{}, err
	}
	if _, err := c.Store.RunGet(ctx, reconcile.RunRef{Kind: reconcile.KindRepo, ID: child}); errors.Is(err, ports.ErrNotFound) {
		return ports.RunRow{}, release.Invalid("child", fmt.Sprintf("repo run %q does not exist", child))
	} else if err != nil {
		return ports.RunRow{}, fmt.Errorf("subtask %s: %w", child, err)
	}
	reason := "add " + child
	if blocking {
		reason += " (blocking)"
	}
	return c.updateWith(ctx, parent, func(row ports.RunRow, _ reconcile.Snapshot) (*ports.RunDecision, *[]reconcile.Subtask, error) {
		list := slices.Clone(row.Subtasks)
		i := slices.IndexFunc(list, func(s reconcile.Subtask) bool { return s.ID == child })
		switch {
		case i >= 0 && list[i].Blocking == blocking:
			return nil, nil, nil // as asked already
		case i >= 0:
			list[i].Blocking = blocking
		case len(list) >= MaxSubtasks:
			return nil, nil, release.Invalid("child", fmt.Sprintf("run %s has %d subtasks, the most it may have", parent, MaxSubtasks))
		default:
			list = append(list, reconcile.Subtask{ID: child, Blocking: blocking})
		}
		return &ports.RunDecision{Action: ActionSubtask, Reason: reason, By: by}, &list, nil
	})
}

// RemoveSubtask removes child from parent's subtasks, recorded as asked by
// by; removing one that is not there changes nothing.
func (c *Control) RemoveSubtask(ctx context.Context, parent reconcile.RunRef, child, by string) (ports.RunRow, error) {
	if err := checkSubtask(parent, child); err != nil {
		return ports.RunRow{}, err
	}
	return c.updateWith(ctx, parent, func(row ports.RunRow, _ reconcile.Snapshot) (*ports.RunDecision, *[]reconcile.Subtask, error) {
		list := slices.DeleteFunc(slices.Clone(row.Subtasks), func(s reconcile.Subtask) bool { return s.ID == child })
		if len(list) == len(row.Subtasks) {
			return nil, nil, nil
		}
		return &ports.RunDecision{Action: ActionSubtask, Reason: "remove " + child, By: by}, &list, nil
	})
}

// checkSubtask checks a subtask request's parent and child.
func checkSubtask(parent reconcile.RunRef, child string) error {
	if parent.Kind != reconcile.KindRepo {
		return release.Invalid("kind", "subtasks belong to repo runs only, not "+string(parent.Kind))
	}
	if !runID.MatchString(child) {
		return release.Invalid("child", fmt.Sprintf("%q is not a run id (letters, digits, '.', '_', '-'; up to 255)", child))
	}
	if child == parent.ID {
		return release.Invalid("child", "a run cannot be its own subtask")
	}
	return nil
}

// setIntent sets the intent on the snapshot's run row.
func setIntent(snap reconcile.Snapshot, in reconcile.Intent) error {
	switch s := snap.(type) {
	case *reconcile.RepoSnapshot:
		s.Run.Reconcile.Intent = in
	case *reconcile.StandaloneSnapshot:
		s.Run.Reconcile.Intent = in
	case *reconcile.PRReviewSnapshot:
		s.Run.Reconcile.Intent = in
	case *reconcile.AgentSnapshot:
		s.Run.Reconcile.Intent = in
	default:
		return fmt.Errorf("set intent: snapshot %T", snap)
	}
	return nil
}

// update reads the run, lets change edit its snapshot's row and writes it
// back under compare-and-swap with change's decision, retrying a lost
// compare-and-swap on a fresh read; a nil decision means nothing to write.
// The run is woken after a write.
func (c *Control) update(ctx context.Context, ref reconcile.RunRef, change func(ports.RunRow, reconcile.Snapshot) (*ports.RunDecision, error)) (ports.RunRow, error) {
	return c.updateWith(ctx, ref, func(row ports.RunRow, snap reconcile.Snapshot) (*ports.RunDecision, *[]reconcile.Subtask, error) {
		d, err := change(row, snap)
		return d, nil, err
	})
}

// updateWith is update whose change may also replace the run's subtasks.
func (c *Control) updateWith(ctx context.Context, ref reconcile.RunRef, change func(ports.RunRow, reconcile.Snapshot) (*ports.RunDecision, *[]reconcile.Subtask, error)) (ports.RunRow, error) {
	if err := ports.ValidateRunRef(ref); err != nil {
		return ports.RunRow{}, release.Invalid("kind", err.Error())
	}
	for attempt := 1; ; attempt++ {
		row, err := c.Store.RunGet(ctx, ref)
		if err != nil {
			return ports.RunRow{}, err
		}
		snap, err := snapshotOf(row, reconcile.World{Now: c.Clock.Now()}, nil)
		if err != nil {
			return ports.RunRow{}, err
		}
		d, subtasks, err := change(row, snap)
		if err != nil || d == nil {
			return row, err
		}
		ctl := snap.Controls()
		body, err := patchedBody(snap, nil, &ctl)
		if err != nil {
			return ports.RunRow{}, err
		}
		_, err = c.Store.RunUpdate(ctx, ports.RunUpdateParams{Ref: ref, ExpectedVersion: row.Version, State: row.State, Body: body,
			Subtasks: subtasks, Decision: d})
		if errors.Is(err, ports.ErrConflict) && attempt < maxCASAttempts {
			continue
		}
		if err != nil {
			return ports.RunRow{}, fmt.Errorf("%s %s: %w", d.Action, ref, err)
		}
		if err := c.wake(ctx, ref); err != nil {
			return ports.RunRow{}, err
		}
		return c.Store.RunGet(ctx, ref)
	}
}

// wake enqueues the run's work item.
func (c *Control) wake(ctx context.Context, ref reconcile.RunRef) error {
	if err := c.Queue.WorkEnqueue(ctx, ports.EnqueueParams{Key: Key(ref), EventTime: c.Clock.Now()}); err != nil {
		return fmt.Errorf("wake %s: %w", ref, err)
	}
	return nil
}
