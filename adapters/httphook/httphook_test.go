package httphook_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/httphook"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

// TestSend: method, headers and a JSON body arrive; status and body come
// back, 2xx or not; no response is an error.
func TestSend(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"method": r.Method, "auth": r.Header.Get("Authorization"),
			"type": r.Header.Get("Content-Type"), "body": string(b)})
	}))
	defer srv.Close()
	c := httphook.Client{}
	resp, err := c.Send(t.Context(), ports.WebhookRequest{URL: srv.URL + "/ok", Headers: map[string]string{"Authorization": "Bearer x"},
		Body: map[string]any{"image": "app:1"}})
	require.NoError(t, err)
	require.Equal(t, 200, resp.Status)
	var got map[string]string
	require.NoError(t, json.Unmarshal(resp.Body, &got))
	require.Equal(t, map[string]string{"method": "POST", "auth": "Bearer x", "type": "application/json", "body": `{"image":"app:1"}`}, got)

	resp, err = c.Send(t.Context(), ports.WebhookRequest{URL: srv.URL + "/fail", Method: "PUT", Body: "raw"})
	require.NoError(t, err)
	require.Equal(t, http.StatusBadGateway, resp.Status)

	_, err = c.Send(t.Context(), ports.WebhookRequest{URL: "http://127.0.0.1:1/nothing"})
	require.Error(t, err)
	_, err = c.Send(t.Context(), ports.WebhookRequest{URL: "::bad"})
	require.Error(t, err)
}

// TestWebhookConformance runs the Webhook port's suite.
func TestWebhookConformance(t *testing.T) {
	t.Parallel()
	porttest.Webhook(t, func(*testing.T) ports.Webhook { return httphook.Client{} })
}
