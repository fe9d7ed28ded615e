package release

import (
	"strconv"
	"time"
)

// PullAgentType is the JobAgent.Type of pull agents: agents outside the
// process that long-poll the API for their next job, hold a lease on it
// by heartbeats and report through the API. A job whose taker stops
// heartbeating is handed out again, at most MaxHandOuts times.
const PullAgentType = "pull"

// APIAgentType is the former name of PullAgentType: a job agent record of
// this type is a pull agent.
const APIAgentType = "api"

// IsPullAgentType reports whether an agent of type typ is a pull agent.
func IsPullAgentType(typ string) bool { return typ == PullAgentType || typ == APIAgentType }

// WebhookAgentType is the JobAgent.Type of the webhook push agent: it
// delivers each job to a receiver, which reports through the API.
const WebhookAgentType = "webhook"

// ReportsThroughAPI reports whether the jobs of an agent of type typ get
// their status from reports sent to the API by the agent (pull agents,
// the webhook agent's receiver). The other types' status comes from the
// system they run on, which serve follows: a report sent to the API on
// their jobs is an operator's override.
func ReportsThroughAPI(typ string) bool { return IsPullAgentType(typ) || typ == WebhookAgentType }

// The defaults and bounds of a pull agent's settings.
const (
	DefaultPullLease  = time.Minute
	MinPullLease      = time.Second
	MaxPullLease      = time.Hour
	DefaultHandOuts   = 3
	MaxHandOutsLimit  = 100
	pullLeaseKey      = "lease"
	pullMaxHandOutKey = "max_hand_outs"
)

// PullSettings are a pull agent's settings, read from its config by
// ParsePullSettings.
type PullSettings struct {
	// Lease is how long a taker holds a job without a heartbeat.
	Lease time.Duration
	// MaxHandOuts bounds how many times a job is handed out: after the
	// lease of the last one runs out, the job is lost (a failure).
	MaxHandOuts int
}

// ParsePullSettings reads a pull agent's settings from its config: `lease`
// (a Go duration string, 1s to 1h, default 1m) and `max_hand_outs` (1 to
// 100, default 3). Other keys (report_secret) are left to their readers.
// An error names the field as job_agent_config.KEY.
func ParsePullSettings(cfg map[string]any) (PullSettings, error) {
	s := PullSettings{Lease: DefaultPullLease, MaxHandOuts: DefaultHandOuts}
	if v, ok := cfg[pullLeaseKey]; ok {
		str, isStr := v.(string)
		d, err := time.ParseDuration(str)
		switch {
		case !isStr:
			return s, Invalid("job_agent_config."+pullLeaseKey, "must be a duration string such as \"30s\"")
		case err != nil:
			return s, Invalid("job_agent_config."+pullLeaseKey, "is not a duration: "+quote(str))
		case d < MinPullLease || d > MaxPullLease:
			return s, Invalid("job_agent_config."+pullLeaseKey, "must be between "+MinPullLease.String()+" and "+MaxPullLease.String()+", got "+d.String())
		}
		s.Lease = d
	}
	if v, ok := cfg[pullMaxHandOutKey]; ok {
		n, isNum := v.(float64) // JSON numbers
		if i, isInt := v.(int); isInt {
			n, isNum = float64(i), true
		}
		switch {
		case !isNum || n != float64(int(n)):
			return s, Invalid("job_agent_config."+pullMaxHandOutKey, "must be a whole number")
		case n < 1 || n > MaxHandOutsLimit:
			return s, Invalid("job_agent_config."+pullMaxHandOutKey, "must be between 1 and "+strconv.Itoa(MaxHandOutsLimit)+", got "+strconv.FormatFloat(n, 'f', -1, 64))
		}
		s.MaxHandOuts = int(n)
	}
	return s, nil
}

// JobTake is a pull agent's job's current hand-out (Job.Take).
type JobTake struct {
	// HandOut numbers the hand-outs of the job from 1. It fences: a report
	// or heartbeat naming another hand-out than the current one is refused.
	HandOut int `json:"hand_out"`
	// MaxHandOuts is the agent's bound when the job was first taken.
	MaxHandOuts int `json:"max_hand_outs"`
	// Taker is the name the taker gave, for people.
	Taker   string    `json:"taker,omitempty"`
	TakenAt time.Time `json:"taken_at"`
	// TokenHash is the hex SHA-256 of the hand-out's take token, which
	// its taker's heartbeats and reports carry (the hand-out number alone
	// is guessable); empty until the token is issued.
	TokenHash string `json:"token_hash,omitempty"`
}

// Takeable reports whether a pull agent's job may be handed to a taker at
// now: it is pending and was never taken, or it is active, its taker's
// lease ran out and it has hand-outs left.
func (j *Job) Takeable(now time.Time) bool {
	switch {
	case !j.Status.IsActive():
		return false
	case j.Take == nil:
		return j.Status == JobPending
	}
	return !j.LeaseUntil.IsZero() && !now.Before(j.LeaseUntil) && j.Take.HandOut < j.Take.MaxHandOuts
}

// Taken is j handed out to taker at now under s (the caller checked
// Takeable): the next hand-out, the lease from now, started (a pending job
// moves to inProgress), and a message saying who has it.
func (j *Job) Taken(now time.Time, s PullSettings, taker string) Job {
	next := *j
	take := JobTake{HandOut: 1, MaxHandOuts: s.MaxHandOuts, Taker: taker, TakenAt: now}
	next.Message = "taken by " + quote(taker)
	if j.Take != nil {
		take.HandOut, take.MaxHandOuts = j.Take.HandOut+1, j.Take.MaxHandOuts
		next.Message = "handed out again to " + quote(taker) + ": the lease of " + quote(j.Take.Taker) +
			" (hand-out " + strconv.Itoa(j.Take.HandOut) + ") ran out at " + j.LeaseUntil.UTC().Format(time.RFC3339Nano)
	}
	next.Message += " (hand-out " + strconv.Itoa(take.HandOut) + " of " + strconv.Itoa(take.MaxHandOuts) + ")"
	next.Take = &take
	next.LeaseUntil = now.Add(s.Lease)
	if next.Status == JobPending {
		next.Status = JobInProgress
	}
	if next.StartedAt.IsZero() {
		next.StartedAt = now
	}
	return next
}

// CheckHandOut reports why a taker holding hand-out handOut is fenced
// from j (its reports and heartbeats refused), or "" when it is not: the
// job was never taken, or was handed out again since.
func (j *Job) CheckHandOut(handOut int) string {
	switch {
	case j.Take == nil:
		return "job " + j.ID + " was never taken"
	case handOut != j.Take.HandOut:
		return "job " + j.ID + " was handed out again: hand-out " + strconv.Itoa(handOut) + " is fenced, the job's taker now is " +
			quote(j.Take.Taker) + " (hand-out " + strconv.Itoa(j.Take.HandOut) + ")"
	}
	return ""
}

// LeaseLost says why an active job with a lease is lost at now, or ""
// when it is not: the lease of an in-process agent (its process died),
// or of a pull agent's last hand-out, ran out unrenewed. A pull agent's
// job with hand-outs left is not lost: the next taker gets it.
func (j *Job) LeaseLost(now time.Time) string {
	if !j.Status.IsActive() || j.LeaseUntil.IsZero() || now.Before(j.LeaseUntil) {
		return ""
	}
	at := j.LeaseUntil.UTC().Format(time.RFC3339Nano)
	if j.Take == nil {
		return "lost: its agent's lease ran out at " + at + " (the process running it stopped)"
	}
	if j.Take.HandOut < j.Take.MaxHandOuts {
		return ""
	}
	return "lost: handed out " + strconv.Itoa(j.Take.HandOut) + " times (the agent's max_hand_outs), and the lease of its last taker " +
		quote(j.Take.Taker) + " ran out at " + at + " without a heartbeat"
}
