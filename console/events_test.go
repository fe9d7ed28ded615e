package console_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/console"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// TestEventsNeedReadScope: the console's event stream is the session's:
// none is sent to the login page (only a token with read logs in), and a
// console without an event stream answers 404 (its pages poll).
func TestEventsNeedReadScope(t *testing.T) {
	t.Parallel()
	f := setup(t)
	res := f.anonymous().get("/events")
	require.Equal(t, http.StatusSeeOther, res.status)
	require.True(t, strings.HasPrefix(res.header.Get("Location"), "/login?next="), res.header.Get("Location"))
	require.Equal(t, http.StatusNotFound, f.login("read").get("/events").status)
}

// TestEventsStreamChanges: a change committed after the stream opened
// arrives as one "change" event naming its kind, with the change's id.
func TestEventsStreamChanges(t *testing.T) {
	t.Parallel()
	clock := ports.SystemClock
	rel, changes := memory.NewReleaseStore(clock), memory.NewChanges(clock, 100, 0)
	rel.SetChanges(changes)
	srv := httptest.NewServer(console.New(console.Options{Releases: rel, Clock: clock, Insecure: true, Changes: changes}).Handler())
	t.Cleanup(srv.Close)

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/events", nil)
	require.NoError(t, err)
	res, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	r := bufio.NewReader(res.Body)
	frame := func() string {
		var b strings.Builder
		for {
			line, err := r.ReadString('\n')
			require.NoError(t, err)
			if line == "\n" {
				return b.String()
			}
			b.WriteString(line)
		}
	}
	require.Equal(t, "retry: 5000\n", frame(), "the stream opens at once")

	_, err = rel.Catalog.CatalogCreate(t.Context(), ports.Revision{Kind: revision.KindWorkflowTemplate, Name: "t", ID: "r1",
		Content: json.RawMessage(`{}`)})
	require.NoError(t, err)
	last, err := changes.ChangesLast(t.Context())
	require.NoError(t, err)
	require.Positive(t, last)
	require.Equal(t, "id: "+itoa(last)+"\nevent: change\ndata: catalog.revision\n", frame())
}
