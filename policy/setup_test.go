package policy

import (
	"testing"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// t0 is Monday 2026-03-02 10:00 UTC.
var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// setup returns an input for deployment "api" in environment "prod" on
// resource "r1", candidate version v2 created at t0, Now = t0.
func setup(t *testing.T) Input {
	t.Helper()
	return Input{
		Now:         t0,
		Deployment:  release.Deployment{ID: "api", SystemID: "sys", Name: "api", Slug: "api"},
		Environment: release.Environment{ID: "prod", SystemID: "sys", Name: "prod", Metadata: map[string]string{"tier": "prod"}},
		Resource:    release.Resource{ID: "r1", WorkspaceID: "ws", Kind: "cluster", Identifier: "c1", Name: "c1"},
		Version:     release.DeploymentVersion{ID: "v2", DeploymentID: "api", Tag: "2.0.0", Status: release.VersionReady, CreatedAt: t0},
	}
}

// job builds a job record for version v with status s finished at done.
func job(id, v string, s release.JobStatus, done time.Time) JobRecord {
	j := JobRecord{Job: release.Job{ID: id, ReleaseID: "rel-" + v, Status: s, CreatedAt: done.Add(-time.Minute)}, VersionID: v}
	if s.IsTerminal() {
		j.CompletedAt = done
	}
	return j
}

func verified(j JobRecord, v release.VerificationStatus) JobRecord {
	j.Verification = v
	return j
}

func version(id string, created time.Time) *release.DeploymentVersion {
	return &release.DeploymentVersion{ID: id, DeploymentID: "api", Tag: id, Status: release.VersionReady, CreatedAt: created}
}

func ptr[T any](v T) *T { return &v }
