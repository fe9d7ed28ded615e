package workflow

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/expr"
)

// EventType names an event of the release chain that can start workflows
// (a template's spec.hooks).
type EventType string

// The events a hook can name.
//
//   - release.created: a release (a version for a target, with its
//     variables) was stored for the first time.
//   - job.failed: a release job ended in failure, invalidJobAgent,
//     invalidIntegration or externalRunNotFound.
//   - verification.failed: the post-deploy verification of a successful
//     job failed.
//   - release.failed: a release failed to roll out: its job ended in a
//     failed status (as job.failed) or its verification failed (as
//     verification.failed); recorded after that event, with the same
//     fields.
//   - resource.created, resource.updated, resource.deleted: a resource was
//     stored for the first time, written again, or deleted. These events
//     name no release, deployment or environment, so they reach only
//     templates without a deployment or system scope.
const (
	EventReleaseCreated     EventType = "release.created"
	EventJobFailed          EventType = "job.failed"
	EventVerificationFailed EventType = "verification.failed"
	EventReleaseFailed      EventType = "release.failed"
	EventResourceCreated    EventType = "resource.created"
	EventResourceUpdated    EventType = "resource.updated"
	EventResourceDeleted    EventType = "resource.deleted"
)

// EventTypes lists the event types, in the order documentation shows them.
var EventTypes = []EventType{EventReleaseCreated, EventJobFailed, EventVerificationFailed, EventReleaseFailed,
	EventResourceCreated, EventResourceUpdated, EventResourceDeleted}

// Valid reports whether e is a known event type.
func (e EventType) Valid() bool {
	for _, k := range EventTypes {
		if e == k {
			return true
		}
	}
	return false
}

// ConcurrencyPolicy says what a scheduled fire does while a workflow of an
// earlier fire of the same template still runs, as Argo's CronWorkflow.
type ConcurrencyPolicy string

// The concurrency policies; empty is Allow.
const (
	ConcurrencyAllow   ConcurrencyPolicy = "allow"
	ConcurrencyForbid  ConcurrencyPolicy = "forbid"
	ConcurrencyReplace ConcurrencyPolicy = "replace"
)

// Hook starts a workflow from the template on each event of its type
// whose filter holds. Parameters map the template's value parameters to
// values that may read the event: a string that is exactly one
// {{event.path}} takes the value's type, references inside text are
// written as text.
type Hook struct {
	// Event is one of EventTypes: release.created, job.failed,
	// verification.failed, release.failed, resource.created,
	// resource.updated or resource.deleted.
	Event EventType `json:"event"`
	// Filter is CEL over `event`; a hook whose filter is false does not start.
	Filter string `json:"filter,omitempty"`
	// Parameters are the workflow's parameters; values may use {{event.…}}.
	Parameters map[string]any `json:"parameters,omitempty"`
}

// RootEvent is the one variable of a hook's filter and the root of its
// parameters' references.
const RootEvent = "event"

var (
	eventEnv   = expr.MustEnv(RootEvent)
	eventRefRe = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)
)

// Event is what a hook's filter and parameters read as event: its type,
// id and time, and the objects it concerns (deployment, environment,
// resource, version, release, job, verification), each a JSON-like map.
type Event map[string]any

// HookMatches evaluates the hook's filter over the event; a hook without a
// filter matches every event of its type.
func HookMatches(h *Hook, e Event) (bool, error) {
	if h.Event != EventType(stringField(e, "type")) {
		return false, nil
	}
	if strings.TrimSpace(h.Filter) == "" {
		return true, nil
	}
	prog, err := eventEnv.CompileBool(h.Filter)
	if err != nil {
		return false, err
	}
	return prog.EvalBool(map[string]any{RootEvent: map[string]any(e)})
}

// HookParameters resolves the hook's parameter mapping over the event. A
// reference to a missing field is a problem naming the parameter.
func HookParameters(h *Hook, e Event) (map[string]any, []Problem) {
	if len(h.Parameters) == 0 {
		return nil, nil
	}
	out := make(map[string]any, len(h.Parameters))
	var ps problems
	for _, name := range sortedKeys(h.Parameters) {
		v, err := resolveEventRefs(h.Parameters[name], e)
		if err != nil {
			ps.add("parameters."+name, "%v", err)
			continue
		}
		out[name] = v
	}
	return out, ps.list
}

// resolveEventRefs resolves {{event.path}} references in a string (other
// values are returned as they are).
func resolveEventRefs(v any, e Event) (any, error) {
	s, ok := v.(string)
	if !ok {
		return v, nil
	}
	if m := eventRefRe.FindStringSubmatch(s); m != nil && m[0] == s {
		return eventPath(m[1], e)
	}
	var firstErr error
	out := eventRefRe.ReplaceAllStringFunc(s, func(ref string) string {
		got, err := eventPath(eventRefRe.FindStringSubmatch(ref)[1], e)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return ""
		}
		return stringify(got)
	})
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// eventPath reads a dotted path under event.
func eventPath(src string, e Event) (any, error) {
	if err := checkEventPath(src); err != nil {
		return nil, err
	}
	var cur any = map[string]any(e)
	for _, k := range strings.Split(src, ".")[1:] {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("{{%s}}: %s is not an object", src, k)
		}
		if cur, ok = m[k]; !ok {
			return nil, fmt.Errorf("{{%s}}: the event has no %s", src, k)
		}
	}
	return cur, nil
}

// checkEventPath accepts event.a.b paths only.
func checkEventPath(src string) error {
	if !pathRe.MatchString(src) || strings.Contains(src, "[") {
		return fmt.Errorf("{{%s}}: want a path such as {{event.version.tag}}", src)
	}
	if root := strings.SplitN(src, ".", 2)[0]; root != RootEvent || !strings.Contains(src, ".") {
		return fmt.Errorf("{{%s}}: a hook's parameters read only event.<field>", src)
	}
	return nil
}

func stringField(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// Cron returns the template's parsed cron schedule in its timezone,
// or nil when it has none. Validate reports what makes it fail.
func (t *Template) Cron() (*Cron, error) {
	if t.Spec.Schedule == "" {
		return nil, nil
	}
	loc, err := LoadTimezone(t.Spec.Timezone)
	if err != nil {
		return nil, err
	}
	return ParseCron(t.Spec.Schedule, loc)
}

// StartingDeadline is how late a missed fire may still start (zero: no
// limit; see Spec.StartingDeadlineSeconds).
func (t *Template) StartingDeadline() time.Duration {
	if t.Spec.StartingDeadlineSeconds == nil {
		return 0
	}
	return time.Duration(*t.Spec.StartingDeadlineSeconds) * time.Second
}

// triggers validates spec.hooks and the schedule fields.
func (v *validator) triggers() {
	s := &v.t.Spec
	seen := map[EventType]int{}
	for i := range s.Hooks {
		h := &s.Hooks[i]
		path := indexPath("spec.hooks", i)
		switch {
		case h.Event == "":
			v.ps.add(joinPath(path, "event"), "required; want %s", eventWords())
		case !h.Event.Valid():
			v.ps.add(joinPath(path, "event"), "unknown event %q; want %s", h.Event, eventWords())
		default:
			if j, dup := seen[h.Event]; dup && h.Filter == s.Hooks[j].Filter {
				v.ps.add(joinPath(path, "event"), "duplicate hook (also spec.hooks[%d]): one event would start the template once anyway", j)
			}
			seen[h.Event] = i
		}
		if h.Filter != "" {
			if _, err := eventEnv.CompileBool(h.Filter); err != nil {
				v.ps.add(joinPath(path, "filter"), "%s", exprMessage(err))
			}
		}
		for _, name := range sortedKeys(h.Parameters) {
			ppath := joinPath(joinPath(path, "parameters"), name)
			p := v.param(name)
			switch {
			case p == nil:
				v.ps.add(ppath, "unknown parameter %q", name)
				continue
			case p.Type == TypeMatrix:
				v.ps.add(ppath, "a matrix parameter takes its items from its source")
				continue
			}
			if str, ok := h.Parameters[name].(string); ok {
				for _, m := range eventRefRe.FindAllStringSubmatch(str, -1) {
					if err := checkEventPath(m[1]); err != nil {
						v.ps.add(ppath, "%v", err)
					}
				}
			}
		}
	}
	if s.Schedule == "" {
		for field, set := range map[string]bool{"timezone": s.Timezone != "", "concurrencyPolicy": s.ConcurrencyPolicy != "",
			"startingDeadlineSeconds": s.StartingDeadlineSeconds != nil} {
			if set {
				v.ps.add("spec."+field, "only a template with a schedule has a %s", field)
			}
		}
		return
	}
	loc, err := LoadTimezone(s.Timezone)
	if err != nil {
		v.ps.add("spec.timezone", "%v", err)
	}
	if _, err := ParseCron(s.Schedule, loc); err != nil {
		v.ps.add("spec.schedule", "bad schedule %q: %v", s.Schedule, err)
	}
	switch s.ConcurrencyPolicy {
	case "", ConcurrencyAllow, ConcurrencyForbid, ConcurrencyReplace:
	default:
		v.ps.add("spec.concurrencyPolicy", "unknown policy %q; want allow, forbid or replace", s.ConcurrencyPolicy)
	}
	if d := s.StartingDeadlineSeconds; d != nil && *d < 0 {
		v.ps.add("spec.startingDeadlineSeconds", "must not be negative")
	}
}

func eventWords() string {
	words := make([]string, len(EventTypes))
	for i, e := range EventTypes {
		words[i] = string(e)
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
