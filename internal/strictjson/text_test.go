package strictjson_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/strictjson"
)

func TestDecodeRefusesAlteredText(t *testing.T) {
	type inner struct {
		Name string         `json:"name"`
		Tags map[string]any `json:"tags"`
	}
	type doc struct {
		ID    string  `json:"id"`
		Items []inner `json:"items"`
	}
	for _, tc := range []struct {
		name, in, want string
	}{
		{"duplicate top-level key", `{"id":"a","id":"b"}`, `id: duplicate key "id"`},
		{"duplicate nested key", `{"items":[{"name":"x"},{"name":"y","name":"z"}]}`, `items[1].name: duplicate key "name"`},
		{"duplicate map key", `{"items":[{"tags":{"k":1,"k":2}}]}`, `items[0].tags.k: duplicate key "k"`},
		{"invalid UTF-8", "{\"id\":\"a\xffb\"}", "invalid UTF-8"},
		{"lone high surrogate", `{"id":"\ud800x"}`, `lone UTF-16 surrogate \ud800`},
		{"lone low surrogate", `{"id":"\udc00"}`, `lone UTF-16 surrogate \udc00`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v doc
			err := strictjson.Decode([]byte(tc.in), &v)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	for _, ok := range []string{
		`{"id":"a","items":[{"name":"x","tags":{"id":1}},{"name":"x"}]}`,
		`{"id":"\ud83d\ude00 ä \\u0041 \"q\""}`,
		`{"items":[{"tags":{"a":{"a":1},"b":[{"a":1},{"a":2}]}}]}`,
	} {
		var v doc
		require.NoError(t, strictjson.Decode([]byte(ok), &v), ok)
	}
}
