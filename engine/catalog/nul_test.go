package catalog_test

import (
	"encoding/json"
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
		"apiVersion": "ctrlplane.dev/v1", "kind": "WorkflowTemplate",
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
