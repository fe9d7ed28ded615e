package catalog_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// nulTemplate is a valid workflow template named x with one job task whose
// config maps key to value.
func nulTemplate(key, value string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "reconciler.dev/v1", "kind": "WorkflowTemplate",
		"metadata": map[string]any{"name": "x"},
		"spec":     map[string]any{"tasks": []any{map[string]any{"name": "a", "type": "job", "jobAgentRef": "ci", "config": map[string]any{key: value}}}},
	})
	return b
}

// TestNULCharacterIsRefused: a string holding a NUL character (which
// Postgres cannot store in text or jsonb) is refused at create and at edit,
// on every store, naming the field; nothing changes.
func TestNULCharacterIsRefused(t *testing.T) {
	t.Parallel()
	for name, newStore := range storeFactories {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			store := newStore(t)
			s := catalog.New(store, catalog.Config{})
			obj := wt("x")

			_, err := s.Create(ctx, catalog.CreateParams{Kind: obj.Kind, Name: obj.Name, Content: nulTemplate("note", "a\x00b")})
			require.ErrorIs(t, err, revision.ErrValidation)
			require.ErrorContains(t, err, "content.spec.tasks[0].config.note: must not contain a NUL character")
			all, err := store.CatalogList(ctx, ports.CatalogListParams{})
			require.NoError(t, err)
			require.Empty(t, all, "a refused create stores nothing")

			r, err := s.Create(ctx, catalog.CreateParams{Kind: obj.Kind, Name: obj.Name, Content: nulTemplate("note", "a")})
			require.NoError(t, err)
			_, err = s.Edit(ctx, catalog.EditParams{Ref: r.Ref(), Version: r.Version, Content: nulTemplate("no\x00te", "a")})
			require.ErrorIs(t, err, revision.ErrValidation)
			require.ErrorContains(t, err, "content.spec.tasks[0].config (a key \"no\\x00te\"): must not contain a NUL character")
			requireSame(t, s, r)

			// An escaped backslash followed by u0000 is text, not a NUL.
			_, err = s.Edit(ctx, catalog.EditParams{Ref: r.Ref(), Version: r.Version, Content: nulTemplate("note", `a\u0000`)})
			require.NoError(t, err)
		})
	}
}

// TestControlCharactersAreRefused: besides NUL, every control character
// but tab, newline and carriage return (an ANSI escape, backspace, DEL, a
// C1 character) is refused in a value or a key at create, naming the
// field and the character; tabs and newlines, which templates hold
// legitimately, are kept.
func TestControlCharactersAreRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store := storeFactories["memory"](t)
	s := catalog.New(store, catalog.Config{})
	obj := wt("x")
	for _, c := range []struct{ key, value, want string }{
		{"note", "\x1b[31mred\x1b[0m", "content.spec.tasks[0].config.note: must not contain the control character U+001B"},
		{"note", "a\bb", "content.spec.tasks[0].config.note: must not contain the control character U+0008"},
		{"note", "a\x7fb", "content.spec.tasks[0].config.note: must not contain the control character U+007F"},
		{"note", "a\u009bb", "content.spec.tasks[0].config.note: must not contain the control character U+009B"},
		{"no\x1bte", "a", "content.spec.tasks[0].config (a key \"no\\x1bte\"): must not contain the control character U+001B"},
	} {
		_, err := s.Create(ctx, catalog.CreateParams{Kind: obj.Kind, Name: obj.Name, Content: nulTemplate(c.key, c.value)})
		require.ErrorIs(t, err, revision.ErrValidation, "%q", c.value)
		require.ErrorContains(t, err, c.want)
	}
	all, err := store.CatalogList(ctx, ports.CatalogListParams{})
	require.NoError(t, err)
	require.Empty(t, all, "a refused create stores nothing")

	r, err := s.Create(ctx, catalog.CreateParams{Kind: obj.Kind, Name: obj.Name, Content: nulTemplate("script", "set -e\n\techo ok\r\n")})
	require.NoError(t, err, "tab, newline and carriage return are allowed")
	require.JSONEq(t, string(nulTemplate("script", "set -e\n\techo ok\r\n")), string(r.Content))
}

// TestMetadataRefusesControlCharacters: label keys and values and
// annotation keys hold no control character, annotation values none but
// tab, newline and carriage return; values are bounded; the error names
// the label; nothing changes.
func TestMetadataRefusesControlCharacters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store := storeFactories["memory"](t)
	s := catalog.New(store, catalog.Config{})
	obj := wt("x")
	r, err := s.Create(ctx, catalog.CreateParams{Kind: obj.Kind, Name: obj.Name, Content: nulTemplate("note", "a"), Labels: map[string]string{"team": "a"}})
	require.NoError(t, err)
	for _, c := range []struct {
		labels, annotations map[string]string
		want                string
	}{
		{labels: map[string]string{"team": "\x1b[31mred"}, want: "labels.team: the value must not contain a control character"},
		{labels: map[string]string{"te\x1bam": "a"}, want: `labels: key "te\x1bam" must not contain a control character`},
		{labels: map[string]string{"team": "a\nb"}, want: "labels.team: the value must not contain a control character"},
		{labels: map[string]string{"team": strings.Repeat("a", catalog.MaxLabelValueLen+1)}, want: "labels.team: the value is 1025 bytes long; at most 1024"},
		{annotations: map[string]string{"doc": "a\u009bb"}, want: "annotations.doc: the value must not contain a control character"},
	} {
		_, err := s.UpdateMetadata(ctx, catalog.MetadataParams{Ref: r.Ref(), Version: r.Version, Labels: c.labels, Annotations: c.annotations})
		require.ErrorIs(t, err, revision.ErrValidation)
		require.ErrorContains(t, err, c.want)
	}
	requireSame(t, s, r)
	_, err = s.UpdateMetadata(ctx, catalog.MetadataParams{Ref: r.Ref(), Version: r.Version, Annotations: map[string]string{"doc": "line one\n\tline two\r\n"}})
	require.NoError(t, err, "annotations may hold tabs and newlines")
}
