package github

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	deliveryid "github.com/reconcilerhq/reconciler/internal/delivery"
	"github.com/reconcilerhq/reconciler/internal/githubhook"
)

// maxDelivery caps a webhook delivery's body.
const maxDelivery = 1 << 20

// PREvent names a pull request a delivery concerns.
type PREvent struct {
	// Event is the X-GitHub-Event name.
	Event string
	// Repo is owner/name; URL the pull request's html URL.
	Repo   string
	Number int
	URL    string
}

// Webhook is the receiver of GitHub webhook deliveries: an http.Handler
// that verifies X-Hub-Signature-256 (HMAC-SHA256 of the body with Secret)
// and calls OnPR for every pull request a pull_request,
// pull_request_review, check_suite or check_run delivery names, so the runs
// following it are observed again at once. Other events are acknowledged
// and ignored. With Deliveries set, a verified delivery is taken once by
// its X-GitHub-Delivery id (deliveryid.Admit: 200 for a replay).
type Webhook struct {
	Secret     []byte
	OnPR       func(ctx context.Context, e PREvent)
	Deliveries deliveryid.Claim
}

// delivery is the part of a payload the receiver reads.
type delivery struct {
	Repository struct {
		FullName string `json:"full_name"`
		HTMLURL  string `json:"html_url"`
	} `json:"repository"`
	PullRequest *struct {
		Number  int    `json:"number"`
		HTMLURL string `json:"html_url"`
	} `json:"pull_request"`
	CheckSuite *struct {
		PullRequests []struct {
			Number int `json:"number"`
		} `json:"pull_requests"`
	} `json:"check_suite"`
	CheckRun *struct {
		PullRequests []struct {
			Number int `json:"number"`
		} `json:"pull_requests"`
	} `json:"check_run"`
}

// ServeHTTP handles one delivery: 405 for a method other than POST, 413
// over 1 MiB, 401 for a missing or wrong signature (checked over the raw
// body), 400 for a body that is neither JSON nor a form whose payload
// field is JSON (GitHub's two content types), else 204.
func (h Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxDelivery+1))
	if err != nil {
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return
	}
	if len(body) > maxDelivery {
		http.Error(w, "body over 1 MiB", http.StatusRequestEntityTooLarge)
		return
	}
	if !githubhook.VerifySignature(h.Secret, body, r.Header.Get("X-Hub-Signature-256")) {
		http.Error(w, "X-Hub-Signature-256 missing or wrong", http.StatusUnauthorized)
		return
	}
	event := r.Header.Get("X-GitHub-Event")
	payload, err := githubhook.Payload(r.Header.Get("Content-Type"), body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !deliveryid.Admit(w, r, h.Deliveries) {
		return
	}
	var d delivery
	if err := json.Unmarshal(payload, &d); err != nil {
		http.Error(w, "body is not JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	for _, e := range d.events(event) {
		if h.OnPR != nil {
			h.OnPR(r.Context(), e)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// Sign returns the X-Hub-Signature-256 value of body under secret, as
// GitHub computes it.
func Sign(secret, body []byte) string { return githubhook.Sign(secret, body) }

// events lists the pull requests the delivery concerns.
func (d delivery) events(event string) []PREvent {
	repo := d.Repository.FullName
	url := func(n int) string { return strings.TrimRight(d.Repository.HTMLURL, "/") + "/pull/" + strconv.Itoa(n) }
	var out []PREvent
	switch event {
	case "pull_request", "pull_request_review":
		if d.PullRequest != nil && d.PullRequest.Number > 0 {
			u := d.PullRequest.HTMLURL
			if u == "" {
				u = url(d.PullRequest.Number)
			}
			out = append(out, PREvent{Event: event, Repo: repo, Number: d.PullRequest.Number, URL: u})
		}
	case "check_suite":
		if d.CheckSuite != nil {
			for _, pr := range d.CheckSuite.PullRequests {
				out = append(out, PREvent{Event: event, Repo: repo, Number: pr.Number, URL: url(pr.Number)})
			}
		}
	case "check_run":
		if d.CheckRun != nil {
			for _, pr := range d.CheckRun.PullRequests {
				out = append(out, PREvent{Event: event, Repo: repo, Number: pr.Number, URL: url(pr.Number)})
			}
		}
	}
	return out
}
