// Package delivery remembers the ids of webhook deliveries (GitHub's
// X-GitHub-Delivery) so a verified delivery is taken once: a replay of a
// captured delivery within the window changes nothing.
package delivery

import (
	"context"
	"net/http"
	"time"
)

// Header is the header GitHub names a delivery with (a GUID).
const Header = "X-GitHub-Delivery"

// Window is how long a delivery id is remembered: GitHub lets a delivery
// be redelivered for three days.
const Window = 72 * time.Hour

// Claim claims delivery id; false means it was claimed before (within
// Window).
type Claim func(ctx context.Context, id string) (bool, error)

// Admit claims the delivery of r, whose signature was verified, and
// reports whether it is to be taken. When it is not, Admit has answered:
// 400 without a delivery id, 503 when the claim failed, and 200 "duplicate
// delivery ignored" for a replay (GitHub redelivers on anything but 2xx).
// A nil claim admits every delivery.
func Admit(w http.ResponseWriter, r *http.Request, claim Claim) bool {
	if claim == nil {
		return true
	}
	id := r.Header.Get(Header)
	if id == "" || len(id) > 200 {
		http.Error(w, Header+" missing or over 200 bytes", http.StatusBadRequest)
		return false
	}
	fresh, err := claim(r.Context(), id)
	switch {
	case err != nil:
		http.Error(w, "cannot record the delivery", http.StatusServiceUnavailable)
		return false
	case !fresh:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("duplicate delivery ignored\n"))
		return false
	}
	return true
}
