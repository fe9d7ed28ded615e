package runs

import (
	"context"
	"fmt"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// NonTerminal is the resync source of the run kinds: it lists every
// non-terminal run of the given kinds.
func NonTerminal(store ports.RunStore, kinds ...reconcile.RunKind) engine.ResyncSource {
	return func(ctx context.Context, yield func(ports.WorkKey) error) error {
		for _, k := range kinds {
			after := ""
			for {
				rows, err := store.RunList(ctx, ports.RunListParams{Kind: k, NonTerminal: true, AfterID: after, Limit: 500})
				if err != nil {
					return fmt.Errorf("list %s runs: %w", k, err)
				}
				for _, r := range rows {
					if err := yield(Key(r.Ref)); err != nil {
						return err
					}
				}
				if len(rows) < 500 {
					break
				}
				after = rows[len(rows)-1].Ref.ID
			}
		}
		return nil
	}
}
