package runobserve

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/reconcilerhq/reconciler/reconcile"
)

// ReviewEventLine starts the optional first line of a review text that
// carries its verdict ("review-event: APPROVE"), where the agent has one
// text to write (a pod's termination message).
const ReviewEventLine = "review-event:"

// reviewEvents are the verdicts a review may carry.
var reviewEvents = map[string]bool{"COMMENT": true, "APPROVE": true, "REQUEST_CHANGES": true}

// Review is the draft of review text body with verdict event, from a
// runtime that brings back at most limit bytes of it: a body of limit
// bytes or more may have been cut (by the runtime, or before it, as
// Kubernetes cuts a termination message), so it is kept to limit bytes
// (on a character boundary), marked Truncated and ends with a line saying
// so. A verdict other than COMMENT, APPROVE or REQUEST_CHANGES (space and
// case aside) is dropped: the review comments.
func Review(body, event string, limit int) *reconcile.ReviewDraft {
	d := &reconcile.ReviewDraft{Body: body}
	if e := strings.ToUpper(strings.TrimSpace(event)); reviewEvents[e] {
		d.Event = e
	}
	if len(body) >= limit {
		cut := limit
		for cut > 0 && cut < len(body) && !utf8.RuneStart(body[cut]) {
			cut--
		}
		d.Body, d.Truncated = body[:cut], true
		d.Body += fmt.Sprintf("\n\n(reconciler: the agent's review may be longer; its runtime brings back at most %d bytes.)", limit)
	}
	return d
}

// SplitReviewEvent splits a review text whose first line may be
// "review-event: VERDICT" into its body and verdict.
func SplitReviewEvent(text string) (body, event string) {
	first, rest, _ := strings.Cut(text, "\n")
	if v, ok := strings.CutPrefix(strings.TrimSpace(first), ReviewEventLine); ok {
		return rest, strings.TrimSpace(v)
	}
	return text, ""
}
