package runs

import (
	"encoding/json"
	"fmt"

	"github.com/reconcilerhq/reconciler/reconcile"
)

// mergePatch copies the set fields of src into dst.
func mergePatch(dst, src *reconcile.Patch) {
	if src.ClearIntent {
		dst.ClearIntent = true
	}
	if src.ResetSession {
		dst.ResetSession = true
	}
	if src.RetryCount != nil {
		dst.RetryCount = src.RetryCount
	}
	if src.AutoResumes != nil {
		dst.AutoResumes = src.AutoResumes
	}
	if src.ResumeTrigger != nil {
		dst.ResumeTrigger = src.ResumeTrigger
	}
	if src.PR != nil {
		dst.PR = src.PR
	}
	if src.ReviewRunning != nil {
		dst.ReviewRunning = src.ReviewRunning
	}
	if src.Error != nil {
		dst.Error = src.Error
	}
	if src.ReconcileAttempts != nil {
		dst.ReconcileAttempts = src.ReconcileAttempts
	}
	if src.FinishedAt != nil {
		dst.FinishedAt = src.FinishedAt
	}
	if src.Reruns != nil {
		dst.Reruns = src.Reruns
	}
	if src.ReviewedSHA != nil {
		dst.ReviewedSHA = src.ReviewedSHA
	}
	if src.ReviewDone != nil {
		dst.ReviewDone = src.ReviewDone
	}
	if src.ConsecutiveFailures != nil {
		dst.ConsecutiveFailures = src.ConsecutiveFailures
	}
	if src.TurnStartedAt != nil {
		dst.TurnStartedAt = src.TurnStartedAt
	}
	if src.TurnDone != nil {
		dst.TurnDone = src.TurnDone
	}
	if src.KeepWarmUntil != nil {
		dst.KeepWarmUntil = src.KeepWarmUntil
	}
	if src.PodHeld != nil {
		dst.PodHeld = src.PodHeld
	}
	if src.PendingMessages != nil {
		dst.PendingMessages = src.PendingMessages
	}
	if src.TurnMessages != nil {
		dst.TurnMessages = src.TurnMessages
	}
}

func setIf[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

// patchedBody returns the run row of snap with patch and the reconcile
// columns applied, encoded as the stored body.
func patchedBody(snap reconcile.Snapshot, p *reconcile.Patch, ctl *reconcile.Reconcile) (json.RawMessage, error) {
	if p == nil {
		p = &reconcile.Patch{}
	}
	c := *ctl
	if p.ClearIntent {
		c.Intent = reconcile.IntentNone
	}
	setIf(&c.Attempts, p.ReconcileAttempts)
	var v any
	switch s := snap.(type) {
	case *reconcile.RepoSnapshot:
		r := s.Run
		r.Reconcile = c
		setIf(&r.RetryCount, p.RetryCount)
		setIf(&r.AutoResumes, p.AutoResumes)
		setIf(&r.ResumeTrigger, p.ResumeTrigger)
		setIf(&r.PR, p.PR)
		setIf(&r.ReviewRunning, p.ReviewRunning)
		setIf(&r.Error, p.Error)
		if p.ResetSession {
			r.SessionID = ""
		}
		v = r
	case *reconcile.StandaloneSnapshot:
		r := s.Run
		r.Reconcile = c
		setIf(&r.RetryCount, p.RetryCount)
		setIf(&r.Error, p.Error)
		setIf(&r.FinishedAt, p.FinishedAt)
		v = r
	case *reconcile.PRReviewSnapshot:
		r := s.Run
		r.Reconcile = c
		setIf(&r.Reruns, p.Reruns)
		setIf(&r.ReviewedSHA, p.ReviewedSHA)
		setIf(&r.ReviewDone, p.ReviewDone)
		setIf(&r.Error, p.Error)
		v = r
	case *reconcile.AgentSnapshot:
		r := s.Run
		r.Reconcile = c
		setIf(&r.ConsecutiveFailures, p.ConsecutiveFailures)
		setIf(&r.TurnStartedAt, p.TurnStartedAt)
		setIf(&r.TurnDone, p.TurnDone)
		setIf(&r.KeepWarmUntil, p.KeepWarmUntil)
		setIf(&r.PodHeld, p.PodHeld)
		setIf(&r.PendingMessages, p.PendingMessages)
		setIf(&r.TurnMessages, p.TurnMessages)
		setIf(&r.Error, p.Error)
		v = r
	default:
		return nil, fmt.Errorf("patch: unknown snapshot %T", snap)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode body: %w", err)
	}
	return b, nil
}
