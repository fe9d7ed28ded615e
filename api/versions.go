package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// VersionCreate is the body of a version creation.
type VersionCreate struct {
	ID             string                `json:"id,omitempty" doc:"version id (default DEPLOYMENT-TAG)"`
	DeploymentID   string                `json:"deployment_id" minLength:"1"`
	Tag            string                `json:"tag" minLength:"1"`
	Name           string                `json:"name,omitempty"`
	Config         map[string]any        `json:"config,omitempty"`
	JobAgentConfig map[string]any        `json:"job_agent_config,omitempty"`
	Metadata       map[string]string     `json:"metadata,omitempty"`
	Status         release.VersionStatus `json:"status,omitempty" enum:"building,ready,paused,rejected,failed" doc:"default ready"`
}

// VersionStatusChange is the body of a version status change.
type VersionStatusChange struct {
	Status release.VersionStatus `json:"status" enum:"ready,paused,rejected"`
}

// ApprovalCreate is the body of an approval; the approver is the caller.
type ApprovalCreate struct {
	EnvironmentID string `json:"environment_id" minLength:"1"`
}

// ApprovalResult is a recorded approval and whether it is new.
type ApprovalResult struct {
	Approval release.Approval `json:"approval"`
	// Added is false when the caller had already approved.
	Added bool `json:"added"`
}

// ForceDeployCreate is the body of a force-deploy; its author is the
// caller.
type ForceDeployCreate struct {
	EnvironmentID string `json:"environment_id,omitempty" doc:"only this environment's targets"`
	ResourceID    string `json:"resource_id,omitempty" doc:"only this resource's targets"`
	Reason        string `json:"reason,omitempty"`
	ExpiresIn     string `json:"expires_in,omitempty" doc:"Go duration after which the force ends, e.g. 2h (default: never)"`
}

// VersionTargetVerdicts is one target's verdicts on a version.
type VersionTargetVerdicts struct {
	Target   release.ReleaseTarget `json:"target"`
	Decision policy.Decision       `json:"decision"`
	Verdicts []policy.RuleVerdict  `json:"verdicts"`
	// Forced names the force-deploy pinning the target, when one does.
	Forced string `json:"forced,omitempty"`
}

// VersionCreateResult is the version created, or with dry_run the version
// that would be, with its plan.
type VersionCreateResult struct {
	release.DeploymentVersion
	// DryRun says nothing was stored.
	DryRun bool `json:"dry_run,omitempty"`
	// Plan is, with dry_run, what the version would do on each target of
	// the page.
	Plan []VersionPlanTarget `json:"plan,omitempty"`
	// NextCursor continues the plan (pass it as cursor).
	NextCursor string `json:"next_cursor,omitempty"`
}

// versionCreated is createVersion's answer: 201 with the version, or 200
// with a dry run's plan.
type versionCreated struct {
	Status int
	Body   VersionCreateResult
}

// VersionPath names a version in a path.
type VersionPath struct {
	ID string `path:"id" doc:"version id"`
}

func (s *Server) registerVersions() {
	huma.Register(s.api, s.created(s.op("createVersion", http.MethodPost, "/versions",
		"Create a deployment version and evaluate its targets; with dry_run=true store nothing and answer 200 with the version's plan: "+
			"for each target of its deployment (a page, in key order), whether it would be chosen at once, every rule's verdict, "+
			"the earliest time it may be chosen and what it waits for", ports.ScopeWrite, "versions")),
		func(ctx context.Context, in *struct {
			DryRun        bool   `query:"dry_run" doc:"store nothing; answer the version's plan"`
			EnvironmentID string `query:"environment_id" doc:"with dry_run: only this environment's targets"`
			PageParams
			Body VersionCreate
		}) (*versionCreated, error) {
			b := in.Body
			v := release.DeploymentVersion{ID: b.ID, DeploymentID: b.DeploymentID, Tag: b.Tag, Name: b.Name, Config: b.Config,
				JobAgentConfig: b.JobAgentConfig, Metadata: b.Metadata, Status: b.Status}
			if v.ID == "" {
				v.ID = v.DeploymentID + "-" + v.Tag
			}
			if in.DryRun {
				after, err := in.after()
				if err != nil {
					return nil, err
				}
				got, plan, err := s.planVersion(ctx, v, in.EnvironmentID, after, in.limit())
				if err != nil {
					return nil, s.fail(ctx, err)
				}
				return &versionCreated{Status: http.StatusOK, Body: VersionCreateResult{DeploymentVersion: got, DryRun: true,
					Plan: plan.Items, NextCursor: plan.NextCursor}}, nil
			}
			if err := s.o.Chain.CreateVersion(ctx, v); err != nil {
				return nil, s.fail(ctx, err)
			}
			got, err := s.o.Releases.VersionGet(ctx, v.ID)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			return &versionCreated{Status: http.StatusCreated, Body: VersionCreateResult{DeploymentVersion: got}}, nil
		})
	huma.Register(s.api, s.op("listVersions", http.MethodGet, "/versions", "List a deployment's versions, newest first", ports.ScopeRead, "versions"),
		func(ctx context.Context, in *struct {
			DeploymentID string `query:"deployment_id" required:"true" minLength:"1"`
			PageParams
		}) (*body[Page[release.DeploymentVersion]], error) {
			if _, err := s.o.Releases.Deployments().Get(ctx, in.DeploymentID); err != nil {
				return nil, s.fail(ctx, err)
			}
			// One keyset page from the cursor's (created_at, id): O(page).
			p, err := newestPage(&in.PageParams, func(after *ports.NewestKey, limit int) ([]release.DeploymentVersion, error) {
				return s.o.Releases.VersionsPage(ctx, ports.VersionPageParams{DeploymentID: in.DeploymentID, After: after, Limit: limit})
			}, func(v *release.DeploymentVersion) (time.Time, string) { return v.CreatedAt, v.ID })
			if err != nil {
				return nil, s.failPage(ctx, err)
			}
			return reply(p), nil
		})
	huma.Register(s.api, s.op("getVersion", http.MethodGet, "/versions/{id}", "Read a deployment version", ports.ScopeRead, "versions"),
		func(ctx context.Context, in *VersionPath) (*body[release.DeploymentVersion], error) {
			v, err := s.o.Releases.VersionGet(ctx, in.ID)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			return reply(v), nil
		})
	huma.Register(s.api, s.op("setVersionStatus", http.MethodPost, "/versions/{id}/status", "Set a version ready, paused or rejected and re-evaluate its targets", ports.ScopeWrite, "versions"),
		func(ctx context.Context, in *struct {
			VersionPath
			Body VersionStatusChange
		}) (*body[release.DeploymentVersion], error) {
			set := s.o.Chain.SetVersionStatus
			if s.live != nil {
				set = s.live.SetVersionStatus // the change and its targets' work in one transaction
			}
			if err := set(ctx, in.ID, in.Body.Status); err != nil {
				return nil, s.fail(ctx, err)
			}
			v, err := s.o.Releases.VersionGet(ctx, in.ID)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			return reply(v), nil
		})
	huma.Register(s.api, s.created(s.op("approveVersion", http.MethodPost, "/versions/{id}/approvals", "Approve a version in an environment as the caller", ports.ScopeApprove, "versions")),
		func(ctx context.Context, in *struct {
			VersionPath
			Body ApprovalCreate
		}) (*body[ApprovalResult], error) {
			env, err := s.o.Chain.ResolveEnvironment(ctx, in.ID, in.Body.EnvironmentID)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			a := release.Approval{VersionID: in.ID, EnvironmentID: env, User: principal(ctx).Name}
			added, err := s.o.Chain.Approve(ctx, a)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			list, err := s.o.Releases.ApprovalList(ctx, in.ID, env)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			for _, got := range list {
				if got.User == a.User {
					a = got
				}
			}
			noteAudit(ctx, fmt.Sprintf("approved version %s for environment %s (added: %t)", in.ID, a.EnvironmentID, added))
			return reply(ApprovalResult{Approval: a, Added: added}), nil
		})
	huma.Register(s.api, s.op("listApprovals", http.MethodGet, "/versions/{id}/approvals", "List a version's approvals", ports.ScopeRead, "versions"),
		func(ctx context.Context, in *struct {
			VersionPath
			EnvironmentID string `query:"environment_id" doc:"only this environment's"`
		}) (*body[[]release.Approval], error) {
			if _, err := s.o.Releases.VersionGet(ctx, in.ID); err != nil {
				return nil, s.fail(ctx, err)
			}
			list, err := s.o.Releases.ApprovalList(ctx, in.ID, in.EnvironmentID)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			if list == nil {
				list = []release.Approval{}
			}
			return reply(list), nil
		})
	huma.Register(s.api, s.created(s.op("forceDeploy", http.MethodPost, "/versions/{id}/force-deploys", "Force-deploy a version whatever the policies say (job gates still hold)", ports.ScopeApprove, "versions")),
		func(ctx context.Context, in *struct {
			VersionPath
			Body ForceDeployCreate
		}) (*body[release.PolicySkip], error) {
			sk := release.PolicySkip{VersionID: in.ID, EnvironmentID: in.Body.EnvironmentID, ResourceID: in.Body.ResourceID,
				Reason: in.Body.Reason, CreatedBy: principal(ctx).Name}
			if in.Body.ExpiresIn != "" {
				d, err := time.ParseDuration(in.Body.ExpiresIn)
				if err != nil || d <= 0 {
					return nil, invalid("body.expires_in", "want a positive duration such as 2h, got "+in.Body.ExpiresIn)
				}
				sk.ExpiresAt = s.o.Clock.Now().Add(d)
			}
			got, err := s.o.Chain.ForceDeploy(ctx, sk)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			noteAudit(ctx, fmt.Sprintf("force-deployed version %s (environment %q, resource %q, reason %q; skip %s)", in.ID, sk.EnvironmentID, sk.ResourceID, sk.Reason, got.ID))
			return reply(got), nil
		})
	huma.Register(s.api, s.op("listForceDeploys", http.MethodGet, "/versions/{id}/force-deploys", "List a version's force-deploys", ports.ScopeRead, "versions"),
		func(ctx context.Context, in *VersionPath) (*body[[]release.PolicySkip], error) {
			if _, err := s.o.Releases.VersionGet(ctx, in.ID); err != nil {
				return nil, s.fail(ctx, err)
			}
			skips, err := s.o.Releases.PolicySkipList(ctx, in.ID)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			out := []release.PolicySkip{}
			for _, sk := range skips {
				if sk.RuleID == release.ForceDeployRule {
					out = append(out, sk)
				}
			}
			return reply(out), nil
		})
	huma.Register(s.api, s.noContent(s.op("endForceDeploy", http.MethodDelete, "/versions/{id}/force-deploys/{skip}", "End a force-deploy; the policies decide again", ports.ScopeApprove, "versions")),
		func(ctx context.Context, in *struct {
			VersionPath
			Skip string `path:"skip"`
		}) (*struct{}, error) {
			if err := s.o.Chain.EndForceDeploy(ctx, in.ID, in.Skip); err != nil {
				return nil, s.fail(ctx, err)
			}
			return nil, nil
		})
	huma.Register(s.api, s.op("explainVersion", http.MethodGet, "/versions/{id}/explain", "Every rule's verdict on a version for each target of its deployment", ports.ScopeRead, "versions"),
		func(ctx context.Context, in *struct {
			VersionPath
			EnvironmentID string `query:"environment_id" doc:"only this environment's targets"`
			PageParams
		}) (*body[Page[VersionTargetVerdicts]], error) {
			after, err := in.after()
			if err != nil {
				return nil, err
			}
			v, err := s.o.Releases.VersionGet(ctx, in.ID)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			targets, err := s.o.Releases.TargetList(ctx, ports.TargetListParams{
				Scope: ports.TargetScope{DeploymentID: v.DeploymentID, EnvironmentID: in.EnvironmentID}, AfterKey: after, Limit: in.limit() + 1})
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			out := make([]VersionTargetVerdicts, 0, len(targets))
			for _, t := range targets {
				x, err := s.o.Chain.Explain(ctx, t, 0)
				if err != nil {
					return nil, s.fail(ctx, err)
				}
				vv := VersionTargetVerdicts{Target: t, Forced: x.Forced, Verdicts: []policy.RuleVerdict{}}
				for _, c := range x.Versions {
					if c.Version.ID == v.ID {
						vv.Decision, vv.Verdicts = c.Decision, c.Verdicts
					}
				}
				out = append(out, vv)
			}
			return reply(page(out, in.limit(), func(v *VersionTargetVerdicts) string { return v.Target.Key() })), nil
		})
}

// created makes op answer 201.
func (s *Server) created(op huma.Operation) huma.Operation {
	op.DefaultStatus = http.StatusCreated
	return op
}

// noContent makes op answer 204.
func (s *Server) noContent(op huma.Operation) huma.Operation {
	op.DefaultStatus = http.StatusNoContent
	return op
}
