package chain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// versionEnvironment resolves ref, an environment's id or name, within the
// system of version v's deployment: an approval or a force-deploy can only
// be about an environment the version can reach. The id wins over a name;
// a name matching nothing is ErrNotFound, one matching several is
// ErrConflict listing their ids. An environment of another system is not
// found, whatever its id.
func (c *Chain) versionEnvironment(ctx context.Context, v release.DeploymentVersion, ref string) (string, error) {
	d, err := c.Store.Deployments().Get(ctx, v.DeploymentID)
	if err != nil {
		return "", fmt.Errorf("deployment %s of version %s: %w", v.DeploymentID, v.ID, err)
	}
	sys := d.Value.SystemID
	var byName []string
	p := ports.ListParams{Parent: sys, Limit: ports.MaxListLimit}
	for {
		page, err := c.Store.Environments().List(ctx, p)
		if err != nil {
			return "", fmt.Errorf("environments of system %s: %w", sys, err)
		}
		for _, e := range page.Items {
			if e.Value.ID == ref {
				return e.Value.ID, nil
			}
			if e.Value.Name == ref {
				byName = append(byName, e.Value.ID)
			}
		}
		if page.Continue == "" {
			break
		}
		p.Continue = page.Continue
	}
	switch len(byName) {
	case 0:
		return "", fmt.Errorf("no environment %s in system %s, the system of version %s: %w", strconv.Quote(ref), sys, v.ID, ports.ErrNotFound)
	case 1:
		return byName[0], nil
	}
	slices.Sort(byName)
	return "", fmt.Errorf("environment name %s names %d environments of system %s (%s): give the id: %w",
		strconv.Quote(ref), len(byName), sys, strings.Join(byName, ", "), ports.ErrConflict)
}

// ResolveEnvironment is the id of the environment ref (an id or a name)
// names within the system of version versionID, as Approve and ForceDeploy
// resolve it: ErrNotFound when none, ErrConflict when a name names several.
func (c *Chain) ResolveEnvironment(ctx context.Context, versionID, ref string) (string, error) {
	// Checked before the lookups, whose errors would quote the ids as given.
	if err := errors.Join(release.CheckControl("version_id", versionID), release.CheckControl("environment_id", ref)); err != nil {
		return "", err
	}
	v, err := c.Store.VersionGet(ctx, versionID)
	if err != nil {
		return "", fmt.Errorf("version %s: %w", versionID, err)
	}
	return c.versionEnvironment(ctx, v, ref)
}
