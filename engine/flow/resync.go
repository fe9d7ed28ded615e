package flow

import (
	"context"
	"fmt"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
)

// resyncPage is how many workflows a sweep reads at a time.
const resyncPage = 200

// ResyncSource is the workflows' part of the periodic sweep
// (engine.Resync): the work key of every workflow that has not finished,
// so a workflow whose wake-up was lost (a pass that ended Done waiting for
// a report that never came) is looked at again.
func (c *Controller) ResyncSource() engine.ResyncSource {
	return func(ctx context.Context, yield func(ports.WorkKey) error) error {
		after := ""
		for {
			ws, err := c.Store.WorkflowList(ctx, after, resyncPage)
			if err != nil {
				return fmt.Errorf("resync workflows: %w", err)
			}
			for i := range ws {
				if ws[i].Phase.Terminal() {
					continue
				}
				if err := yield(Key(ws[i].ID)); err != nil {
					return err
				}
			}
			if len(ws) < resyncPage {
				return nil
			}
			after = ws[len(ws)-1].ID
		}
	}
}
