package policy

import (
	"strconv"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// RolloutType is how a gradual rollout spaces its targets.
type RolloutType string

// The rollout types.
const (
	// RolloutLinear: target at position p starts at p × interval.
	RolloutLinear RolloutType = "linear"
	// RolloutLinearNormalized: target at position p of n starts at
	// trunc(p / n × interval), so the whole rollout takes one interval.
	RolloutLinearNormalized RolloutType = "linear-normalized"
)

// GradualRollout releases a version to the targets of each environment of
// the deployment one after another.
//
//   - A target that already runs the version (its newest successful or
//     active job is for it): Allowed.
//   - Under Evaluate, while an anyApproval or environmentProgression rule of
//     the same evaluation is not Allowed: Pending with no Until (the rollout
//     has not started).
//   - Start = the latest of version.created_at, Input.ApprovalSatisfiedAt,
//     Input.ProgressionSatisfiedAt and the SatisfiedAt of the approval and
//     progression rules Evaluate ran; then, under Evaluate, moved to the
//     next opening of every allow deploymentWindow rule it is outside of and
//     the closing of every deny window it is inside, until no window moves
//     it (windows a policy skip waives, and every window for a target's
//     first deployment, do not count, as the window rule ignores them).
//   - Targets are ordered by FNV-1a 64 of (target key + version ID),
//     ascending (ties by key); position p of n is the target's index in
//     that order among the Input.DeploymentTargets of its own deployment and
//     environment (the target itself included).
//   - Offset = p × TimeScaleInterval seconds (linear) or
//     trunc(p / n × TimeScaleInterval) seconds (linear-normalized).
//   - Now before start + offset: Pending until then. Otherwise Allowed,
//     SatisfiedAt = start + offset.
type GradualRollout struct {
	// RolloutType is linear or linear-normalized.
	RolloutType RolloutType `json:"rollout_type"`
	// TimeScaleInterval is in seconds.
	TimeScaleInterval int64 `json:"time_scale_interval"`
}

// Type is TypeGradualRollout.
func (GradualRollout) Type() RuleType { return TypeGradualRollout }

func (r GradualRollout) validate(path string) error {
	switch r.RolloutType {
	case RolloutLinear, RolloutLinearNormalized:
	default:
		return release.Invalid(release.Field(path, "rollout_type"), "must be linear or linear-normalized, not "+strconv.Quote(string(r.RolloutType)))
	}
	if r.TimeScaleInterval < 0 {
		return release.Invalid(release.Field(path, "time_scale_interval"), "must not be negative")
	}
	return nil
}

// Evaluate applies the rule to in, on its own: the rollout start comes from
// the version and the satisfied times in Input.
func (r GradualRollout) Evaluate(in *Input) Verdict { return r.evaluate(in, nil) }

func (r GradualRollout) evaluate(in *Input, cx *evalContext) Verdict {
	if in.runsVersion() {
		return allowed("the target already runs the version")
	}
	start := later(in.Version.CreatedAt, later(in.ApprovalSatisfiedAt, in.ProgressionSatisfiedAt))
	if cx != nil {
		if cx.gatesBlocked {
			return pending("the rollout starts once approvals and environment progression pass", timeZero)
		}
		start = later(start, later(cx.approvalAt, cx.progressionAt))
		if len(cx.windows) > 0 && in.successfulVersionID() != "" {
			start = windowStart(cx.windows, start)
		}
	}
	pos, n, ok := in.RolloutOrder.position(in.Target(), in.Version.ID, in.DeploymentTargets)
	if !ok {
		pos, n = RolloutPosition(in.Target(), in.Version.ID, in.DeploymentTargets)
	}
	at := start.Add(r.Offset(pos, n))
	if in.Now.Before(at) {
		return pending("rollout position "+strconv.Itoa(pos+1)+" of "+strconv.Itoa(n)+" (started "+start.UTC().Format(time.RFC3339)+
			"): deploys at "+at.UTC().Format(time.RFC3339), at)
	}
	return Verdict{Status: Allowed, Message: "the rollout reached this target", SatisfiedAt: at}
}

// Offset is the delay of position pos of n after the rollout start.
func (r GradualRollout) Offset(pos, n int) time.Duration {
	if pos <= 0 || r.TimeScaleInterval <= 0 {
		return 0
	}
	var secs int64
	if r.RolloutType == RolloutLinearNormalized {
		secs = int64(pos) * r.TimeScaleInterval / int64(max(n, 1))
	} else {
		secs = int64(pos) * r.TimeScaleInterval
	}
	return time.Duration(secs) * time.Second
}

// maxWindowShifts bounds how often windows move a rollout's start (windows
// that keep moving it past each other leave the window rules to gate).
const maxWindowShifts = 64

// windowStart is the earliest time at or after t that is inside every allow
// window and outside every deny window, found by moving t to the next
// opening of an allow window it is outside of (one with no further opening
// does not move it: its rule denies) and to the closing of a deny window it
// is inside.
func windowStart(windows []DeploymentWindow, t time.Time) time.Time {
	for range maxWindowShifts {
		moved := false
		for i := range windows {
			w, err := compileWindow(windows[i].RRule, windows[i].Timezone)
			if err != nil {
				continue
			}
			st := w.at(t, time.Duration(windows[i].DurationMinutes)*time.Minute)
			switch {
			case windows[i].IsAllow() && !st.inside && !st.next.IsZero():
				t, moved = st.next, true
			case !windows[i].IsAllow() && st.inside:
				t, moved = st.closes, true
			}
		}
		if !moved {
			break
		}
	}
	return t
}

// RolloutPosition is target's 0-based position in the rollout order of
// versionID over the targets of its deployment and environment (target
// counted once, whether listed or not), and the number of those targets.
func RolloutPosition(target release.ReleaseTarget, versionID string, targets []release.ReleaseTarget) (pos, n int) {
	h := RolloutHash(target, versionID)
	n = 1
	for i := range targets {
		t := targets[i]
		if t == target || t.DeploymentID != target.DeploymentID || t.EnvironmentID != target.EnvironmentID {
			continue
		}
		n++
		th := RolloutHash(t, versionID)
		if th < h || (th == h && targetLess(t, target)) {
			pos++
		}
	}
	return pos, n
}

// RolloutHash is FNV-1a 64 over target.Key() + versionID, computed without
// building the key.
func RolloutHash(target release.ReleaseTarget, versionID string) uint64 {
	h := uint64(fnvOffset)
	h = fnvString(h, target.DeploymentID)
	h = fnvByte(h, ':')
	h = fnvString(h, target.EnvironmentID)
	h = fnvByte(h, ':')
	h = fnvString(h, target.ResourceID)
	return fnvString(h, versionID)
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime }

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

// targetLess orders targets by key.
func targetLess(a, b release.ReleaseTarget) bool {
	if a.DeploymentID != b.DeploymentID {
		return a.DeploymentID+":" < b.DeploymentID+":"
	}
	if a.EnvironmentID != b.EnvironmentID {
		return a.EnvironmentID+":" < b.EnvironmentID+":"
	}
	return a.ResourceID < b.ResourceID
}
