package reconcile

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func genAnySnapshot() *rapid.Generator[Snapshot] {
	return rapid.OneOf(
		rapid.Map(genRepoSnapshot(), func(s *RepoSnapshot) Snapshot { return s }),
		rapid.Map(genStandaloneSnapshot(), func(s *StandaloneSnapshot) Snapshot { return s }),
		rapid.Map(genPRReviewSnapshot(), func(s *PRReviewSnapshot) Snapshot { return s }),
		rapid.Map(genAgentSnapshot(), func(s *AgentSnapshot) Snapshot { return s }),
	)
}

// TestCodecRoundTripProperty: every snapshot and the action decided on it
// survive JSON encoding unchanged, and replaying the decoded snapshot gives
// the same action.
func TestCodecRoundTripProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := genAnySnapshot().Draw(t, "snapshot")
		data, err := EncodeSnapshot(s)
		require.NoError(t, err)
		back, err := DecodeSnapshot(data)
		require.NoError(t, err)
		require.Equal(t, s, back)

		a := Decide(s)
		enc, err := EncodeAction(a)
		require.NoError(t, err)
		dec, err := DecodeAction(enc)
		require.NoError(t, err)
		require.Equal(t, a, dec)
		require.Equal(t, a, Decide(back), "replay gives the same decision")
	})
}

func TestDecodeSnapshotRefusesBadInput(t *testing.T) {
	t.Parallel()
	const now = `"now":"2026-01-01T00:00:00Z"`
	cases := []struct {
		name, in, want string
	}{
		{"syntax error has position", "{\"kind\":\"repo\",\n  \"now\" \"x\"}", "line 2, column"},
		{"not an object", `[1,2]`, "want an object"},
		{"missing kind", `{` + now + `}`, "kind: required"},
		{"kind not a string", `{"kind":3}`, "kind: must be a string"},
		{"unknown kind", `{"kind":"cron",` + now + `}`, `kind: unknown kind "cron"`},
		{"unknown field", `{"kind":"repo",` + now + `,"run":{"id":"r","state":"queued","colour":"red"}}`, `run.colour: unknown field`},
		{"wrong type", `{"kind":"repo",` + now + `,"run":{"id":"r","state":"queued","retry_count":"two"}}`, "-: run.retry_count: cannot use a JSON string"},
		{"wrong type in embedded list", `{"kind":"repo",` + now + `,"run":{"id":"r","state":"queued"},"read_errors":[{"source":1}]}`, "-: read_errors[0].source: cannot use a JSON number"},
		{"missing now", `{"kind":"repo","run":{"id":"r","state":"queued"}}`, "now: required"},
		{"missing id", `{"kind":"repo",` + now + `,"run":{"state":"queued"}}`, "run.id: required"},
		{"missing state", `{"kind":"repo",` + now + `,"run":{"id":"r"}}`, "run.state: required"},
		{"state of another kind", `{"kind":"standalone",` + now + `,"run":{"id":"r","state":"pr_opened"}}`, `run.state: "pr_opened" is not a standalone state`},
		{"unknown intent", `{"kind":"repo",` + now + `,"run":{"id":"r","state":"queued","reconcile":{"control_intent":"explode"}}}`, "unknown intent"},
		{"bad duration", `{"kind":"repo",` + now + `,"run":{"id":"r","state":"queued"},"settings":{"stall_threshold":"soon"}}`, "settings.stall_threshold"},
		{"empty", ``, "empty document"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := DecodeSnapshot([]byte(c.in))
			require.Error(t, err)
			// Prefixing "-: " checks that a path, when expected, starts the message.
			if strings.HasPrefix(c.want, "-: ") {
				require.True(t, strings.HasPrefix(err.Error(), c.want[3:]), "error %q does not start with %q", err, c.want[3:])
				return
			}
			require.True(t, ErrSnapshot(err), "bad input is a snapshot error, not an internal one: %v", err)
			require.True(t, strings.Contains(err.Error(), c.want), "error %q does not mention %q", err, c.want)
		})
	}
}

func TestDecodeActionRefusesUnknownType(t *testing.T) {
	t.Parallel()
	_, err := DecodeAction([]byte(`{"type":"launchMissiles","reason":"x"}`))
	require.ErrorContains(t, err, "unknown type")
	_, err = DecodeAction([]byte(`{"type":"noop","reason":"x","extra":1}`))
	require.ErrorContains(t, err, "extra")
}
