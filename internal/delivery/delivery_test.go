package delivery_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/delivery"
)

// TestAdmit: a new id is admitted once; a replay is 200 and not admitted;
// a missing or oversized id is 400; a failed claim 503; no claim admits.
func TestAdmit(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	claim := func(_ context.Context, id string) (bool, error) {
		if id == "broken" {
			return false, errors.New("store down")
		}
		fresh := !seen[id]
		seen[id] = true
		return fresh, nil
	}
	for _, tc := range []struct {
		name, id string
		claim    delivery.Claim
		admitted bool
		status   int
	}{
		{"new", "d-1", claim, true, http.StatusOK},
		{"replay", "d-1", claim, false, http.StatusOK},
		{"another", "d-2", claim, true, http.StatusOK},
		{"missing", "", claim, false, http.StatusBadRequest},
		{"oversized", string(make([]byte, 201)), claim, false, http.StatusBadRequest},
		{"store down", "broken", claim, false, http.StatusServiceUnavailable},
		{"no claim", "", nil, true, http.StatusOK},
	} {
		req := httptest.NewRequest(http.MethodPost, "/hook", nil)
		if tc.id != "" {
			req.Header.Set(delivery.Header, tc.id)
		}
		w := httptest.NewRecorder()
		require.Equal(t, tc.admitted, delivery.Admit(w, req, tc.claim), tc.name)
		require.Equal(t, tc.status, w.Code, tc.name)
	}
}
