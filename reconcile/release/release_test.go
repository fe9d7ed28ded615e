package release

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestReleaseIDContent(t *testing.T) {
	t.Parallel()
	tgt := ReleaseTarget{"d", "e", "r"}
	base := map[string]Value{
		"replicas": {Literal: 3},
		"image":    {Literal: map[string]any{"repo": "x", "tag": "1"}},
		"region":   {Reference: &Reference{Relation: "cluster", Path: []string{"metadata", "region"}}},
		"token":    {Sensitive: &SecretRef{Ref: "vault:kv/token"}},
	}
	id := ReleaseID(tgt, "v1", base)
	require.Len(t, id, 64)

	same := map[string]Value{ // other construction order, float vs int
		"token":    {Sensitive: &SecretRef{Ref: "vault:kv/token"}},
		"region":   {Reference: &Reference{Relation: "cluster", Path: []string{"metadata", "region"}}},
		"image":    {Literal: map[string]any{"tag": "1", "repo": "x"}},
		"replicas": {Literal: 3.0},
	}
	require.Equal(t, id, ReleaseID(tgt, "v1", same), "identical content, same id")

	with := func(k string, v Value) map[string]Value {
		m := map[string]Value{}
		for kk, vv := range base {
			m[kk] = vv
		}
		m[k] = v
		return m
	}
	different := map[string]string{
		"version":        ReleaseID(tgt, "v2", base),
		"target":         ReleaseID(ReleaseTarget{"d", "e", "r2"}, "v1", base),
		"literal value":  ReleaseID(tgt, "v1", with("replicas", Value{Literal: 4})),
		"literal type":   ReleaseID(tgt, "v1", with("replicas", Value{Literal: "3"})),
		"reference path": ReleaseID(tgt, "v1", with("region", Value{Reference: &Reference{Relation: "cluster", Path: []string{"metadata.region"}}})),
		"secret ref":     ReleaseID(tgt, "v1", with("token", Value{Sensitive: &SecretRef{Ref: "vault:kv/other"}})),
		"secret kind":    ReleaseID(tgt, "v1", with("token", Value{Literal: "vault:kv/token"})),
		"extra var":      ReleaseID(tgt, "v1", with("new", Value{})),
		"no vars":        ReleaseID(tgt, "v1", nil),
		"key boundary":   ReleaseID(ReleaseTarget{"d:e", "", "r"}, "v1", base),
	}
	seen := map[string]string{id: "base"}
	for name, got := range different {
		require.NotContains(t, seen, got, "%s collides with %s", name, seen[got])
		seen[got] = name
	}
}

func TestReleaseIDProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		keys := rapid.SliceOfDistinct(rapid.StringMatching(`[a-z]{1,4}`), rapid.ID).Draw(t, "keys")
		vars := map[string]Value{}
		for _, k := range keys {
			vars[k] = Value{Literal: rapid.OneOf(rapid.Just[any](nil), rapid.Map(rapid.Int(), func(i int) any { return i }),
				rapid.Map(rapid.String().Filter(func(s string) bool { return !strings.ContainsRune(s, 0) }), // no store keeps NUL
					func(s string) any { return s })).Draw(t, "lit")}
		}
		tgt := ReleaseTarget{"d", "e", rapid.StringMatching(`r[0-9]`).Draw(t, "r")}
		a := NewRelease(tgt, "v", vars, time.Time{})
		// A JSON round trip keeps the content and so the ID.
		b, err := json.Marshal(a)
		require.NoError(t, err)
		var back Release
		require.NoError(t, json.Unmarshal(b, &back))
		require.Equal(t, a.ID, ReleaseID(back.Target, back.VersionID, back.Variables))
		require.NoError(t, back.Validate())
	})
}

func TestReleaseValidate(t *testing.T) {
	t.Parallel()
	r := NewRelease(ReleaseTarget{"d", "e", "r"}, "v", map[string]Value{"a": {Literal: 1}}, time.Unix(0, 0))
	require.NoError(t, r.Validate())
	r.Variables["a"] = Value{Literal: 2}
	err := r.Validate()
	require.ErrorIs(t, err, ErrInvalid)
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "id", fe.Field)
}
