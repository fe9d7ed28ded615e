package configmap

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

func TestReaderNamesTheFirstBadField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg   map[string]any
		read  func(r *Reader)
		field string
	}{
		{map[string]any{}, func(r *Reader) { r.Required("name") }, "cfg.name"},
		{map[string]any{"name": "  "}, func(r *Reader) { r.Required("name") }, "cfg.name"},
		{map[string]any{"name": 3.0}, func(r *Reader) { r.String("name", "") }, "cfg.name"},
		{map[string]any{"on": "yes"}, func(r *Reader) { r.Bool("on", false) }, "cfg.on"},
		{map[string]any{"wait": "-1s"}, func(r *Reader) { r.Duration("wait", 0) }, "cfg.wait"},
		{map[string]any{"url": "ftp://x"}, func(r *Reader) { r.URL("url", "") }, "cfg.url"},
		{map[string]any{"url": "https://u:p@x"}, func(r *Reader) { r.URL("url", "") }, "cfg.url"},
		{map[string]any{}, func(r *Reader) { r.URL("url", "") }, "cfg.url"},
		{map[string]any{"m": []any{}}, func(r *Reader) { r.Strings("m") }, "cfg.m"},
		{map[string]any{"m": map[string]any{"k": nil}}, func(r *Reader) { r.Strings("m") }, "cfg.m.k"},
		{map[string]any{"t": "ghp_plaintext"}, func(r *Reader) { r.SecretRef("t", "") }, "cfg.t"},
		{map[string]any{"t": "vault:x"}, func(r *Reader) { r.SecretRef("t", "") }, "cfg.t"},
		{map[string]any{"n": 1.5}, func(r *Reader) { r.Int("n", 0, 0, 10) }, "cfg.n"},
		{map[string]any{"n": 11.0}, func(r *Reader) { r.Int("n", 0, 0, 10) }, "cfg.n"},
		{map[string]any{"n": "3"}, func(r *Reader) { r.Int("n", 0, 0, 10) }, "cfg.n"},
		{map[string]any{"l": "sh"}, func(r *Reader) { r.List("l") }, "cfg.l"},
		{map[string]any{"l": []any{"sh", 2.0}}, func(r *Reader) { r.List("l") }, "cfg.l[1]"},
		{map[string]any{"a": 1.0, "b": 2.0}, func(r *Reader) { r.String("a", ""); r.Bool("b", false) }, "cfg.a"},
	} {
		r := &Reader{Prefix: "cfg", Map: tc.cfg}
		tc.read(r)
		var fe *release.FieldError
		require.True(t, errors.As(r.Err, &fe), "%v", tc.cfg)
		require.Equal(t, tc.field, fe.Field, "%v", tc.cfg)
		require.ErrorIs(t, r.Err, release.ErrInvalid)
	}
}

func TestReaderReadsValidValues(t *testing.T) {
	t.Parallel()
	r := &Reader{Prefix: "cfg", Map: map[string]any{"s": "x", "b": true, "d": "90s", "u": "https://h/api/", "t": "env:RECONCILER_SECRET_T",
		"m": map[string]any{"s": "v", "n": 2.5, "b": false}}}
	require.Equal(t, "x", r.Required("s"))
	require.Equal(t, "def", r.String("missing", "def"))
	require.True(t, r.Bool("b", false))
	require.Equal(t, 90*time.Second, r.Duration("d", 0))
	require.Equal(t, "https://h/api", r.URL("u", ""))
	require.Equal(t, "https://default", r.URL("missing", "https://default"))
	require.Equal(t, "env:RECONCILER_SECRET_T", r.SecretRef("t", ""))
	require.Equal(t, map[string]string{"s": "v", "n": "2.5", "b": "false"}, r.Strings("m"))
	r.Map["i"], r.Map["l"] = 3.0, []any{"sh", "-c"}
	require.Equal(t, 3, r.Int("i", 0, 0, 10))
	require.Equal(t, 7, r.Int("missing", 7, 0, 10))
	require.Equal(t, []string{"sh", "-c"}, r.List("l"))
	require.NoError(t, r.Err)
}

func TestResolveNamesTheFieldNeverTheValue(t *testing.T) {
	t.Parallel()
	s := Secrets{"env:A": "s3cret"}
	v, err := Resolve(t.Context(), s, "cfg.tokenRef", "env:A")
	require.NoError(t, err)
	require.Equal(t, "s3cret", v)
	_, err = Resolve(t.Context(), s, "cfg.tokenRef", "env:B")
	require.ErrorContains(t, err, "cfg.tokenRef: secret env:B cannot be read")
	require.ErrorIs(t, err, release.ErrInvalid)
	_, err = Resolve(t.Context(), nil, "cfg.tokenRef", "env:A")
	require.ErrorContains(t, err, "no secret resolver")
}
