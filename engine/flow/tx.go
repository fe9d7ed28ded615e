package flow

import (
	"context"

	"github.com/reconcilerhq/reconciler/ports"
)

// inTx runs fn in one transaction of the store when it has them
// (ports.Transactor), else as it is.
func (c *Controller) inTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if tx, ok := c.Store.(ports.Transactor); ok {
		return tx.InTx(ctx, fn)
	}
	return fn(ctx)
}
