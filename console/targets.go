package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

func (s *Server) routeTargets() {
	s.mux.HandleFunc("GET /{$}", s.page(s.grid))
	s.mux.HandleFunc("GET /grid", s.page(s.gridLive))
	s.mux.HandleFunc("GET /targets/{key}", s.page(s.target))
	s.mux.HandleFunc("GET /targets/{key}/live", s.page(s.targetLive))
	s.mux.HandleFunc("GET /deployments/{id}/versions", s.page(s.versions))
	s.mux.HandleFunc("GET /versions/{id}/plan", s.page(s.versionPlan))
	s.mux.HandleFunc("POST /versions/{id}/approve", s.action(ports.ScopeApprove, s.approve))
	s.mux.HandleFunc("POST /versions/{id}/force-deploy", s.action(ports.ScopeApprove, s.forceDeploy))
	s.mux.HandleFunc("/", s.notFound) // unknown paths are 404 with or without a session
}

// cell is what one release target runs and should run.
type cell struct {
	Key      string
	Resource string
	// Current and Desired are version tags ("" when none).
	Current string
	Desired string
	// Active is the status of the job in flight, if any.
	Active string
	// Status is one word: in-sync, deploying, waiting, no-release,
	// pending (not evaluated yet).
	Status string
	// Reasons say why the desired release is what it is (why newer
	// versions wait).
	Reasons []string
}

// gridRow is one deployment's cells, one list per environment column.
type gridRow struct {
	Deployment release.Deployment
	Cells      [][]cell
}

// gridSystem is one system's deployments × environments table.
type gridSystem struct {
	System       release.System
	Environments []release.Environment
	Rows         []gridRow
}

// gridView is the home page's data.
type gridView struct {
	Systems []gridSystem
	Cut     bool
}

// grid is the home page: for each system, deployments × environments.
func (s *Server) grid(w http.ResponseWriter, r *http.Request) {
	v, err := s.gridData(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "grid", "Deployments", "grid", v)
}

// gridLive is the grid's live table alone (polled).
func (s *Server) gridLive(w http.ResponseWriter, r *http.Request) {
	v, err := s.gridData(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.fragment(w, r, "grid", "live", v)
}

func (s *Server) gridData(ctx context.Context) (gridView, error) {
	var out gridView
	systems, cut, err := listAll(ctx, s.o.Releases.Systems(), "")
	if err != nil {
		return out, err
	}
	out.Cut = cut
	tags := versionTags{s: s}
	for _, sys := range systems {
		envs, cut1, err := listAll(ctx, s.o.Releases.Environments(), sys.ID)
		if err != nil {
			return out, err
		}
		deps, cut2, err := listAll(ctx, s.o.Releases.Deployments(), sys.ID)
		if err != nil {
			return out, err
		}
		targets, err := s.o.Releases.TargetList(ctx, ports.TargetListParams{Scope: ports.TargetScope{SystemID: sys.ID}, Limit: maxRows + 1})
		if err != nil {
			return out, err
		}
		out.Cut = out.Cut || cut1 || cut2 || len(targets) > maxRows
		targets = targets[:min(len(targets), maxRows)]
		g := gridSystem{System: sys, Environments: envs}
		envIndex := map[string]int{}
		for i, e := range envs {
			envIndex[e.ID] = i
		}
		rowIndex := map[string]int{}
		for _, d := range deps {
			rowIndex[d.ID] = len(g.Rows)
			g.Rows = append(g.Rows, gridRow{Deployment: d, Cells: make([][]cell, len(envs))})
		}
		for _, t := range targets {
			ri, ok1 := rowIndex[t.DeploymentID]
			ei, ok2 := envIndex[t.EnvironmentID]
			if !ok1 || !ok2 {
				continue
			}
			c, err := s.cellOf(ctx, t, &tags)
			if err != nil {
				return out, err
			}
			g.Rows[ri].Cells[ei] = append(g.Rows[ri].Cells[ei], c)
		}
		out.Systems = append(out.Systems, g)
	}
	return out, nil
}

// versionTags reads version tags once per request.
type versionTags struct {
	s    *Server
	tags map[string]string
}

// tag is a version's tag, or its id when it is gone.
func (v *versionTags) tag(ctx context.Context, id string) (string, error) {
	if t, ok := v.tags[id]; ok {
		return t, nil
	}
	ver, err := v.s.o.Releases.VersionGet(ctx, id)
	switch {
	case errors.Is(err, ports.ErrNotFound):
		ver.Tag = id
	case err != nil:
		return "", err
	}
	if v.tags == nil {
		v.tags = map[string]string{}
	}
	v.tags[id] = ver.Tag
	return ver.Tag, nil
}

// cellOf reads what target t runs and should run.
func (s *Server) cellOf(ctx context.Context, t release.ReleaseTarget, tags *versionTags) (cell, error) {
	c := cell{Key: t.Key(), Resource: t.ResourceID, Status: "pending"}
	js, err := s.o.Releases.TargetJobState(ctx, t)
	if err != nil {
		return c, err
	}
	if js.Successful != nil {
		c.Current = js.Successful.Version.Tag
	}
	if js.Active != nil {
		c.Active = string(js.Active.Job.Status)
	}
	d, err := s.o.Releases.DesiredGet(ctx, t)
	switch {
	case errors.Is(err, ports.ErrNotFound):
		return c, nil
	case err != nil:
		return c, err
	}
	c.Reasons = d.Reasons
	if d.ReleaseID == "" {
		c.Status = "no-release"
		return c, nil
	}
	rel, err := s.o.Releases.ReleaseGet(ctx, d.ReleaseID)
	if err != nil {
		return c, err
	}
	if c.Desired, err = tags.tag(ctx, rel.VersionID); err != nil {
		return c, err
	}
	switch {
	case c.Active != "":
		c.Status = "deploying"
	case c.Current == c.Desired:
		c.Status = "in-sync"
	default:
		c.Status = "waiting"
	}
	return c, nil
}

// candidate is one version's verdicts on a target, with what the session
// may do about it.
type candidate struct {
	Version  release.DeploymentVersion
	Decision policy.Decision
	Verdicts []policy.RuleVerdict
	// Approvable is set when a rule waits for an approval in the target's
	// environment that the session's user has not given.
	Approvable bool
	Approvers  []string
}

// targetView is the target page's data.
type targetView struct {
	Target      release.ReleaseTarget
	Key         string
	Cell        cell
	Convergence chain.Convergence
	Forced      string
	// Relations are how the target's reference variables resolve.
	Relations  []release.Relation
	Candidates []candidate
	Jobs       []ports.JobRow
	// Decisions are the target's newest recorded decisions, newest first.
	Decisions []ports.TargetDecision
	Now       time.Time
}

// target is one release target: every candidate version's verdicts.
func (s *Server) target(w http.ResponseWriter, r *http.Request) {
	v, err := s.targetData(r, explainVersions)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "target", "Target "+v.Key, "grid", v)
}

// targetLive is the target page's live part alone (polled): its state,
// without the candidates' verdicts.
func (s *Server) targetLive(w http.ResponseWriter, r *http.Request) {
	v, err := s.targetData(r, 0)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.fragment(w, r, "target", "live", v)
}

// explainVersions is how many of a target's newest versions its page
// explains.
const explainVersions = 10

// maxJobs is how many of a target's newest jobs its page lists.
const maxJobs = 10

// maxDecisions is how many of a target's newest decisions its page lists.
const maxDecisions = 10

// targetData reads a target's state and the verdicts of its newest
// versions versions (none when versions is 0).
func (s *Server) targetData(r *http.Request, versions int) (targetView, error) {
	ctx := r.Context()
	t, err := release.ParseTargetKey(r.PathValue("key"))
	if err != nil {
		return targetView{}, release.Invalid("key", err.Error())
	}
	if _, err := s.o.Releases.TargetGet(ctx, t); err != nil {
		return targetView{}, err
	}
	x, err := s.o.Chain.Explain(ctx, t, max(versions, 1))
	if err != nil {
		return targetView{}, err
	}
	tags := versionTags{s: s}
	c, err := s.cellOf(ctx, t, &tags)
	if err != nil {
		return targetView{}, err
	}
	v := targetView{Target: t, Key: t.Key(), Cell: c, Convergence: x.Convergence, Forced: x.Forced, Relations: x.Relations, Now: s.o.Clock.Now(),
		Jobs: x.Jobs[:min(len(x.Jobs), maxJobs)]}
	if versions > 0 {
		if v.Decisions, err = s.o.Releases.TargetDecisions(ctx, t, maxDecisions); err != nil {
			return targetView{}, err
		}
	}
	user := sessionOf(ctx).Name
	for _, vv := range x.Versions[:min(len(x.Versions), versions)] {
		cand := candidate{Version: vv.Version, Decision: vv.Decision, Verdicts: vv.Verdicts}
		approvals, err := s.o.Releases.ApprovalList(ctx, vv.Version.ID, t.EnvironmentID)
		if err != nil {
			return targetView{}, err
		}
		for _, a := range approvals {
			cand.Approvers = append(cand.Approvers, a.User)
		}
		for _, rv := range vv.Verdicts {
			if rv.Type == policy.TypeAnyApproval && rv.Status != policy.Allowed && !slices.Contains(cand.Approvers, user) {
				cand.Approvable = true
			}
		}
		v.Candidates = append(v.Candidates, cand)
	}
	return v, nil
}

// approve records the session user's approval of a version in an
// environment.
func (s *Server) approve(w http.ResponseWriter, r *http.Request) {
	a := release.Approval{VersionID: r.PathValue("id"), EnvironmentID: r.PostFormValue("environment_id"), User: sessionOf(r.Context()).Name}
	if a.EnvironmentID == "" {
		s.fail(w, r, release.Invalid("environment_id", "is required"))
		return
	}
	if _, err := s.o.Chain.Approve(r.Context(), a); err != nil {
		s.fail(w, r, err)
		return
	}
	back(w, r, "/")
}

// forceDeploy pins a version on a target's environment and resource
// whatever the policies say, by the session user.
func (s *Server) forceDeploy(w http.ResponseWriter, r *http.Request) {
	sk := release.PolicySkip{VersionID: r.PathValue("id"), EnvironmentID: r.PostFormValue("environment_id"),
		ResourceID: r.PostFormValue("resource_id"), Reason: r.PostFormValue("reason"), CreatedBy: sessionOf(r.Context()).Name}
	if _, err := s.o.Chain.ForceDeploy(r.Context(), sk); err != nil {
		s.fail(w, r, err)
		return
	}
	back(w, r, "/")
}

// placement is one version of a deployment and the targets running it.
type placement struct {
	Version release.DeploymentVersion
	// Runs are the targets whose newest successful job is of the version;
	// Desired those whose desired release is.
	Runs    []string
	Desired []string
}

// versionsView is a deployment's versions page.
type versionsView struct {
	Deployment release.Deployment
	Versions   []placement
	Cut        bool
	// History is the audit log of the deployment's writes, newest first.
	History []ports.AuditEntry
}

// versions lists a deployment's versions, newest first, and where each
// runs.
func (s *Server) versions(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d, err := s.o.Releases.Deployments().Get(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := versionsView{Deployment: d.Value}
	index := map[string]int{}
	for ver, err := range s.o.Releases.VersionsNewestFirst(ctx, d.Value.ID, ports.DefaultVersionPageSize) {
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if len(v.Versions) == maxRows {
			v.Cut = true
			break
		}
		index[ver.ID] = len(v.Versions)
		v.Versions = append(v.Versions, placement{Version: ver})
	}
	targets, err := s.o.Releases.TargetList(ctx, ports.TargetListParams{Scope: ports.TargetScope{DeploymentID: d.Value.ID}, Limit: maxRows})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, t := range targets {
		js, err := s.o.Releases.TargetJobState(ctx, t)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if js.Successful != nil {
			if i, ok := index[js.Successful.Version.ID]; ok {
				v.Versions[i].Runs = append(v.Versions[i].Runs, t.Key())
			}
		}
		des, err := s.o.Releases.DesiredGet(ctx, t)
		if errors.Is(err, ports.ErrNotFound) || (err == nil && des.ReleaseID == "") {
			continue
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		rel, err := s.o.Releases.ReleaseGet(ctx, des.ReleaseID)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if i, ok := index[rel.VersionID]; ok {
			v.Versions[i].Desired = append(v.Versions[i].Desired, t.Key())
		}
	}
	v.History = s.history(r, "deployments", d.Value.ID)
	s.render(w, r, "versions", "Versions of "+d.Value.Name, "grid", v)
}

// targetURL is the console path of a target's page.
func targetURL(key string) string { return "/targets/" + url.PathEscape(key) }
