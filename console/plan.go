package console

import (
	"net/http"
	"net/url"
	"slices"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// planView is a version's plan: what it does on each target of its
// deployment (api.PlanOf, as POST /versions?dry_run=true answers before
// it exists), in the order the targets may start.
type planView struct {
	Version release.DeploymentVersion
	Targets []api.VersionPlanTarget
	Cut     bool
}

// planURL is the console path of a version's plan.
func planURL(versionID string) string { return "/versions/" + url.PathEscape(versionID) + "/plan" }

// versionPlan shows a version's plan: per target of its deployment (the
// first maxRows), whether it is chosen, every rule's verdict and the
// earliest time it may start, chosen ones first, then by that time (the
// targets that wait for an event last).
func (s *Server) versionPlan(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ver, err := s.o.Releases.VersionGet(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	targets, err := s.o.Releases.TargetList(ctx, ports.TargetListParams{Scope: ports.TargetScope{DeploymentID: ver.DeploymentID}, Limit: maxRows + 1})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := planView{Version: ver, Cut: len(targets) > maxRows}
	now := s.o.Clock.Now()
	for _, t := range targets[:min(len(targets), maxRows)] {
		x, err := s.o.Chain.Explain(ctx, t, 0)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		v.Targets = append(v.Targets, api.PlanOf(&x, ver.ID, now))
	}
	slices.SortStableFunc(v.Targets, func(a, b api.VersionPlanTarget) int {
		switch az, bz := a.Earliest.IsZero(), b.Earliest.IsZero(); {
		case az && bz:
			return 0
		case az:
			return 1
		case bz:
			return -1
		}
		return a.Earliest.Compare(b.Earliest)
	})
	s.render(w, r, "plan", "Plan of "+ver.Tag, "grid", v)
}
