package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TargetStatus is a release target with what it runs and should run.
type TargetStatus struct {
	Target release.ReleaseTarget `json:"target"`
	// Desired is the desired-release decision; absent before the first.
	Desired *ports.DesiredRelease `json:"desired,omitempty"`
	// Current is the newest successful job with its version: what the
	// target runs.
	Current *ports.JobWithVersion `json:"current,omitempty"`
	// Active is the job in flight, if any.
	Active *ports.JobWithVersion `json:"active,omitempty"`
}

// TargetPath names a release target in a path.
type TargetPath struct {
	Key string `path:"key" doc:"target key DEPLOYMENT:ENVIRONMENT:RESOURCE"`
}

// target parses a target key path parameter.
func (k *TargetPath) target() (release.ReleaseTarget, error) {
	t, err := release.ParseTargetKey(k.Key)
	if err != nil {
		return t, huma.Error400BadRequest("bad target key", &huma.ErrorDetail{Location: "path.key", Message: err.Error(), Value: k.Key})
	}
	return t, nil
}

func (s *Server) registerTargets() {
	huma.Register(s.api, s.op("listTargets", http.MethodGet, "/targets", "List release targets with their desired release, current and active job", ports.ScopeRead, "targets"),
		func(ctx context.Context, in *struct {
			SystemID      string `query:"system_id"`
			DeploymentID  string `query:"deployment_id"`
			EnvironmentID string `query:"environment_id"`
			ResourceID    string `query:"resource_id"`
			PageParams
		}) (*body[Page[TargetStatus]], error) {
			after, err := in.after()
			if err != nil {
				return nil, err
			}
			scope := ports.TargetScope{SystemID: in.SystemID, DeploymentID: in.DeploymentID, EnvironmentID: in.EnvironmentID, ResourceID: in.ResourceID}
			targets, err := s.o.Releases.TargetList(ctx, ports.TargetListParams{Scope: scope, AfterKey: after, Limit: in.limit() + 1})
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			reads, err := s.pageStates(ctx, targets)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			out := make([]TargetStatus, 0, len(targets))
			for _, t := range targets {
				st, err := s.targetStatusWith(ctx, t, reads)
				if err != nil {
					return nil, s.fail(ctx, err)
				}
				out = append(out, st)
			}
			return reply(page(out, in.limit(), func(t *TargetStatus) string { return t.Target.Key() })), nil
		})
	huma.Register(s.api, s.op("getTarget", http.MethodGet, "/targets/{key}", "Read a release target's desired release, current and active job", ports.ScopeRead, "targets"),
		func(ctx context.Context, in *TargetPath) (*body[TargetStatus], error) {
			t, err := in.target()
			if err != nil {
				return nil, err
			}
			if _, err := s.o.Releases.TargetGet(ctx, t); err != nil {
				return nil, s.fail(ctx, err)
			}
			st, err := s.targetStatus(ctx, t)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			return reply(st), nil
		})
	huma.Register(s.api, s.op("explainTarget", http.MethodGet, "/targets/{key}/explain", "Every rule's verdict, message and next check time for a target's newest versions, and how its reference variables resolve (relations: the relationship rule and related resource used, or why unresolved)", ports.ScopeRead, "targets"),
		func(ctx context.Context, in *struct {
			TargetPath
			Versions int `query:"versions" minimum:"1" maximum:"1000" default:"5" doc:"how many of the newest versions"`
		}) (*body[chain.Explanation], error) {
			t, err := in.target()
			if err != nil {
				return nil, err
			}
			x, err := s.o.Chain.Explain(ctx, t, in.Versions)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			return reply(x), nil
		})
}

// registerTargetDecisions registers a target's decision history.
func (s *Server) registerTargetDecisions() {
	huma.Register(s.api, s.op("listTargetDecisions", http.MethodGet, "/targets/{key}/decisions",
		"A release target's newest desired-release decisions, newest first: the chosen release, every rule's verdict, the policy revisions, "+
			"what triggered it, when, and the snapshot reconciler decide replays to the same result. Needs scope `read`", ports.ScopeRead, "targets"),
		func(ctx context.Context, in *struct {
			TargetPath
			Limit int `query:"limit" minimum:"0" maximum:"20" default:"20" doc:"how many of the newest decisions (0: all kept)"`
		}) (*body[[]ports.TargetDecision], error) {
			t, err := in.target()
			if err != nil {
				return nil, err
			}
			if _, err := s.o.Releases.TargetGet(ctx, t); err != nil {
				return nil, s.fail(ctx, err)
			}
			ds, err := s.o.Releases.TargetDecisions(ctx, t, in.Limit)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			return reply(ds), nil
		})
}

// targetStatus reads what a target runs and should run.
func (s *Server) targetStatus(ctx context.Context, t release.ReleaseTarget) (TargetStatus, error) {
	return s.targetStatusWith(ctx, t, nil)
}

// pageReads are a page's desired releases and job states, read for every
// target of the page at once.
type pageReads struct {
	desired map[release.ReleaseTarget]ports.DesiredRelease
	jobs    map[release.ReleaseTarget]ports.TargetJobState
}

// pageStates reads the desired releases and job states of a page's
// targets in two calls when the store reads many at once
// (ports.JobStateBatcher); nil otherwise (each is read on its own).
func (s *Server) pageStates(ctx context.Context, ts []release.ReleaseTarget) (*pageReads, error) {
	b, ok := s.o.Releases.(ports.JobStateBatcher)
	if !ok || len(ts) == 0 {
		return nil, nil
	}
	jobs, err := b.TargetJobStateMany(ctx, ts)
	if err != nil {
		return nil, err
	}
	desired, err := b.DesiredGetMany(ctx, ts)
	if err != nil {
		return nil, err
	}
	return &pageReads{desired: desired, jobs: jobs}, nil
}

// targetStatusWith is targetStatus with what page read (nil: read here).
func (s *Server) targetStatusWith(ctx context.Context, t release.ReleaseTarget, page *pageReads) (TargetStatus, error) {
	st := TargetStatus{Target: t}
	if page != nil {
		if d, ok := page.desired[t]; ok {
			st.Desired = &d
		}
		js := page.jobs[t]
		st.Current, st.Active = js.Successful, js.Active
		return st, nil
	}
	d, err := s.o.Releases.DesiredGet(ctx, t)
	switch {
	case err == nil:
		st.Desired = &d
	case !errors.Is(err, ports.ErrNotFound):
		return st, err
	}
	js, err := s.o.Releases.TargetJobState(ctx, t)
	if err != nil {
		return st, err
	}
	st.Current, st.Active = js.Successful, js.Active
	return st, nil
}
