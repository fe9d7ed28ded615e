package strictjson

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type inner struct {
	Checks string `json:"checks"`
	Count  int    `json:"count"`
}

type Embedded struct {
	Now time.Time `json:"now"`
}

type doc struct {
	Kind  string            `json:"kind"`
	Run   inner             `json:"run"`
	Items []inner           `json:"items"`
	Tags  map[string]string `json:"tags"`
	Any   any               `json:"any"`
	Embedded
}

func TestDecodeAccepts(t *testing.T) {
	t.Parallel()
	var d doc
	err := Decode([]byte(`{"kind":"repo","run":{"checks":"ok","count":2},"items":[{"count":1}],"tags":{"a":"b"},"any":{"x":[1]},"now":"2026-01-01T00:00:00Z"}`), &d)
	require.NoError(t, err)
	require.Equal(t, 2, d.Run.Count)
	require.Equal(t, 1, d.Items[0].Count)
	require.Equal(t, 2026, d.Now.Year())
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, path, msg string
		line, col           int
	}{
		{"unknown top", "{\n  \"kind\": \"x\",\n  \"nope\": 1\n}", "nope", `unknown field "nope"`, 3, 3},
		{"unknown nested", `{"run":{"checks":"a","bogus":true}}`, "run.bogus", `unknown field "bogus"`, 1, 22},
		{"unknown in array", `{"items":[{},{"zz":1}]}`, "items[1].zz", `unknown field "zz"`, 1, 15},
		{"type mismatch", `{"run":{"count":"two"}}`, "run.count", "cannot use a JSON string here; want an integer", 1, 17},
		{"type mismatch in array", `{"items":[{"count":1},{"checks":7}]}`, "items[1].checks", "cannot use a JSON number 7 here; want a string", 1, 33},
		{"fraction for int", `{"run":{"count":1.5}}`, "run.count", "want an integer", 1, 17},
		{"syntax", "{\n\"kind\": \"x\",,\n}", "", "syntax error", 2, 13},
		{"empty", "  ", "", "empty document", 0, 0},
		{"trailing", `{} {}`, "", "after top-level value", 1, 4},
		{"bad time", `{"now":"yesterday"}`, "now", "yesterday", 1, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var d doc
			err := Decode([]byte(c.in), &d)
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, c.path, e.Path)
			require.Contains(t, e.Error(), c.msg)
			require.Equal(t, c.line, e.Line)
			if c.col > 0 {
				require.Equal(t, c.col, e.Column)
			}
		})
	}
}

func TestDecodeCustomUnmarshalerErrorsHavePath(t *testing.T) {
	t.Parallel()
	var d doc
	err := Decode([]byte("{\"kind\":\"repo\",\n \"now\": 3}"), &d)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "now", e.Path)
	require.Equal(t, 2, e.Line)
	require.Equal(t, 9, e.Column)
	require.Contains(t, e.Msg, "RFC 3339")
}

func TestDecodeWrongShape(t *testing.T) {
	t.Parallel()
	var d doc
	err := Decode([]byte(`[1]`), &d)
	require.ErrorContains(t, err, "cannot use a JSON array here; want an object")
	err = Decode([]byte(`{"items":{"a":1}}`), &d)
	require.ErrorContains(t, err, "items: cannot use a JSON object here; want an array")
}
