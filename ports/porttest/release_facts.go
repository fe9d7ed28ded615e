package porttest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// relTargetFacts checks TargetFactsGet against the separate reads it
// stands for: before a decision, with "no release", and with a release,
// jobs, an agent and policies; and ErrNotFound for a missing target. At
// each step TargetFactsGetMany reads what TargetFactsGet reads, and leaves
// a missing target out.
func relTargetFacts(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	ctx, s := e.ctx, e.s
	target := tgt(relD1, relE1, relR1)
	relReplace(t, e, ports.TargetScope{SystemID: relSys1}, target, tgt(relD1, relE1, relR2))

	_, err := s.TargetFactsGet(ctx, tgt(relD1, relE1, relR3), 10)
	require.ErrorIs(t, err, ports.ErrNotFound, "a target that is not stored")

	check := func(label string, jobLimit int) ports.TargetFacts {
		t.Helper()
		got, err := s.TargetFactsGet(ctx, target, jobLimit)
		require.NoError(t, err, label)
		// Read together with another target and a missing one (twice), each
		// stored target's facts are what it reads alone.
		other := tgt(relD1, relE1, relR2)
		alone, err := s.TargetFactsGet(ctx, other, jobLimit)
		require.NoError(t, err, label)
		many, err := s.TargetFactsGetMany(ctx, []release.ReleaseTarget{other, tgt(relD1, relE1, relR3), target, other}, jobLimit)
		require.NoError(t, err, label+": many")
		require.Equal(t, map[release.ReleaseTarget]ports.TargetFacts{target: got, other: alone}, many, label+": many")
		det, err := s.TargetGet(ctx, target)
		require.NoError(t, err, label)
		require.Equal(t, det, got.Detail, label+": detail")
		jobs, err := s.JobsByTarget(ctx, target, jobLimit)
		require.NoError(t, err, label)
		if len(jobs) > 0 || len(got.Jobs) > 0 {
			require.Equal(t, jobs, got.Jobs, label+": jobs")
		}
		pols, err := ports.EnabledPolicies(ctx, s)
		require.NoError(t, err, label)
		if len(pols) > 0 || len(got.Policies) > 0 {
			require.Equal(t, pols, got.Policies, label+": policies")
		}
		agent, err := s.JobAgents().Get(ctx, relAgent)
		require.NoError(t, err, label)
		require.Equal(t, &agent, got.Agent, label+": agent")
		d, err := s.DesiredGet(ctx, target)
		if errors.Is(err, ports.ErrNotFound) {
			require.Nil(t, got.Desired, label+": no decision")
			require.Nil(t, got.Release, label)
			return got
		}
		require.NoError(t, err, label)
		require.Equal(t, &d, got.Desired, label+": decision")
		if d.ReleaseID == "" {
			require.Nil(t, got.Release, label+": no release")
			require.Nil(t, got.Version, label+": no release")
			return got
		}
		rel, err := s.ReleaseGet(ctx, d.ReleaseID)
		require.NoError(t, err, label)
		require.Equal(t, &rel, got.Release, label+": release")
		v, err := s.VersionGet(ctx, rel.VersionID)
		require.NoError(t, err, label)
		require.Equal(t, &v, got.Version, label+": version")
		return got
	}
	got := check("before any decision", 0)
	require.Empty(t, got.Jobs)
	require.Empty(t, got.Policies)
	require.Empty(t, got.Detail.VariableSets)

	// The variable sets of the target's system, in id order; not another
	// system's.
	for _, vs := range []release.VariableSet{
		{ID: "vs-b", SystemID: relSys1, Name: "B", Priority: 1, Values: map[string]release.Value{"k": {Literal: "b"}}},
		{ID: "vs-a", SystemID: relSys1, Name: "A", Selector: "true", Values: map[string]release.Value{"k": {Literal: "a"}}},
		{ID: "vs-other", SystemID: relSys2, Name: "Other", Values: map[string]release.Value{"k": {Literal: "x"}}},
	} {
		_, err := s.VariableSets().Put(ctx, vs, 0)
		require.NoError(t, err)
	}
	got = check("with variable sets", 0)
	require.Len(t, got.Detail.VariableSets, 2)
	require.Equal(t, "vs-a", got.Detail.VariableSets[0].ID)
	require.Equal(t, "vs-b", got.Detail.VariableSets[1].ID)
	require.Equal(t, release.Value{Literal: "b"}, got.Detail.VariableSets[1].Values["k"])

	_, err = s.DesiredSet(ctx, ports.DesiredRelease{Target: target, Reasons: []string{"pending approval"}, NextCheckAt: relAt(9)})
	require.NoError(t, err)
	got = check("no release", 0)
	require.NotNil(t, got.Desired)

	for _, p := range []policy.Policy{
		{ID: "p-low", Name: "Low", Selector: "true", Enabled: true, Priority: 1, Rules: []policy.Rule{{ID: "c", Spec: policy.Concurrency{MaxActivePerTarget: 2}}}},
		{ID: "p-high", Name: "High", Selector: "true", Enabled: true, Priority: 5, Rules: []policy.Rule{{ID: "a", Spec: policy.AnyApproval{MinApprovals: 1}}}},
		{ID: "p-off", Name: "Off", Selector: "true", Enabled: false},
	} {
		relPublishPolicy(t, ctx, s, p)
	}
	relDraftPolicy(t, ctx, s, policy.Policy{ID: "p-draft", Name: "Draft", Selector: "true", Enabled: true, Priority: 9})
	r1, r2 := f.release(target, "v1"), f.release(target, "v2")
	relCreateJob(t, e, relJob("j1", r1, release.JobSuccessful, relAt(3)))
	relCreateJob(t, e, relJob("j2", r2, release.JobInProgress, relAt(4)))
	relCreateJob(t, e, relJob("other", f.release(tgt(relD1, relE1, relR2), "v1"), release.JobPending, relAt(5)))
	_, err = s.DesiredSet(ctx, ports.DesiredRelease{Target: target, ReleaseID: r2.ID})
	require.NoError(t, err)
	got = check("with a release", 0)
	require.Equal(t, []string{"j2", "j1"}, relJobIDs(got.Jobs), "the target's jobs, newest first")
	require.Len(t, got.Policies, 2, "enabled published policies only")
	require.Equal(t, "p-high", got.Policies[0].Value.ID, "by priority")
	require.Equal(t, "v2", got.Version.ID)
	got = check("job limit", 1)
	require.Equal(t, []string{"j2"}, relJobIDs(got.Jobs))

	// Force-deploy skips covering the target, by id; not other rules' skips,
	// other scopes or other deployments' versions.
	for _, sk := range []release.PolicySkip{
		{ID: "f-all", VersionID: "v1", RuleID: release.ForceDeployRule, CreatedBy: "ops"},
		{ID: "f-env", VersionID: "v2", RuleID: release.ForceDeployRule, CreatedBy: "ops", EnvironmentID: relE1, ExpiresAt: relAt(1)},
		{ID: "f-other-env", VersionID: "v2", RuleID: release.ForceDeployRule, CreatedBy: "ops", EnvironmentID: relE2},
		{ID: "f-other-res", VersionID: "v2", RuleID: release.ForceDeployRule, CreatedBy: "ops", ResourceID: relR2},
		{ID: "f-other-dep", VersionID: "v3", RuleID: release.ForceDeployRule, CreatedBy: "ops"},
		{ID: "not-force", VersionID: "v1", RuleID: "approval"},
	} {
		require.NoError(t, s.PolicySkipPut(ctx, sk))
	}
	got, err = s.TargetFactsGet(ctx, target, 0)
	require.NoError(t, err)
	var forced []string
	for _, sk := range got.Forced {
		forced = append(forced, sk.ID)
	}
	require.Equal(t, []string{"f-all", "f-env"}, forced)
	require.Equal(t, relNorm(relAt(1)), got.Forced[1].ExpiresAt, "expired ones are included, with their expiry")

	// A deployment whose agent does not exist has no agent in its facts.
	dep, err := s.Deployments().Get(ctx, relD1)
	require.NoError(t, err)
	dep.Value.JobAgentID = "gone"
	_, err = s.Deployments().Put(ctx, dep.Value, dep.Version)
	require.NoError(t, err)
	got, err = s.TargetFactsGet(ctx, target, 0)
	require.NoError(t, err)
	require.Nil(t, got.Agent, "a missing agent")
}

// relJobCreateEnvironmentCap checks MaxActiveInEnvironment: concurrent
// creates for different targets of one environment never take it over its
// cap, the losers get ErrLimitReached and nothing is stored for them, a
// job already created with the key is returned even at the cap, and a
// finished job makes room.
func relJobCreateEnvironmentCap(t *testing.T, e *relEnv) {
	relWorld(t, e)
	ctx, s := e.ctx, e.s
	relCreateVersions(t, e, relVersion("v1", relD1, relAt(1)))
	var targets []release.ReleaseTarget
	for _, r := range []string{relR1, relR2, relR3} {
		targets = append(targets, tgt(relD1, relE1, r))
	}
	other := tgt(relD1, relE2, relR1) // another environment: not capped by e1
	rels := map[release.ReleaseTarget]release.Release{}
	for _, tg := range append(targets, other) {
		rels[tg] = relStoreRelease(t, e, tg, "v1")
	}
	const limit = 2
	type result struct {
		row     ports.JobRow
		created bool
		err     error
	}
	results := make([]result, len(targets))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, tg := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := rels[tg]
			row, created, err := s.JobCreate(ctx, ports.JobCreateParams{Job: relJob(fmt.Sprintf("j%d", i), r, release.JobPending, relAt(2)),
				IdempotencyKey: ports.JobKey(r.ID, 1), MaxActiveInEnvironment: limit})
			results[i] = result{row, created, err}
		}()
	}
	close(start)
	wg.Wait()
	created, refused := 0, -1
	for i, res := range results {
		if res.err != nil {
			require.ErrorIs(t, res.err, ports.ErrLimitReached, "create %d", i)
			refused = i
			continue
		}
		require.True(t, res.created)
		created++
	}
	require.Equal(t, limit, created, "exactly the cap is created")
	require.GreaterOrEqual(t, refused, 0)
	jobs, err := s.JobsByTarget(ctx, targets[refused], 0)
	require.NoError(t, err)
	require.Empty(t, jobs, "a refused create stores nothing")
	counts, err := s.JobsActiveCount(ctx, targets[0])
	require.NoError(t, err)
	require.Equal(t, limit, counts.Environment)

	// At the cap, the key of a created job still returns it.
	winner := (refused + 1) % len(targets)
	r := rels[targets[winner]]
	row, again, err := s.JobCreate(ctx, ports.JobCreateParams{Job: relJob(fmt.Sprintf("j%d", winner), r, release.JobPending, relAt(2)),
		IdempotencyKey: ports.JobKey(r.ID, 1), MaxActiveInEnvironment: limit})
	require.NoError(t, err, "an existing key at the cap")
	require.False(t, again)
	require.Equal(t, results[winner].row, row)

	// Another environment has its own count; a job that is not active is
	// never capped.
	_, _, err = s.JobCreate(ctx, ports.JobCreateParams{Job: relJob("elsewhere", rels[other], release.JobPending, relAt(3)),
		IdempotencyKey: ports.JobKey(rels[other].ID, 1), MaxActiveInEnvironment: 1})
	require.NoError(t, err, "another environment")
	rr := rels[targets[refused]]
	_, _, err = s.JobCreate(ctx, ports.JobCreateParams{Job: func() release.Job {
		j := relJob("ended", rr, release.JobInvalidJobAgent, relAt(3))
		j.CompletedAt = relAt(3)
		return j
	}(), IdempotencyKey: ports.JobKey(rr.ID, 1), MaxActiveInEnvironment: limit})
	require.NoError(t, err, "an ended job takes no room")

	// A finished job makes room.
	relMove(t, e, row.ID, release.JobSuccessful)
	_, ok, err := s.JobCreate(ctx, ports.JobCreateParams{Job: relJob("after", rr, release.JobPending, relAt(4)),
		IdempotencyKey: ports.JobKey(rr.ID, 2), MaxActiveInEnvironment: limit})
	require.NoError(t, err, "room after a job finished")
	require.True(t, ok)
}

// relTargetStamp checks TargetStampMany: each stored target's stamp is the
// Stamp its facts were read with (a missing target left out), it stays
// while nothing changes, and it changes with every fact it covers: the
// desired release, a job created or moved, the deployment, environment,
// resource and agent, and a policy published. Another target's change
// leaves it.
func relTargetStamp(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	ctx, s := e.ctx, e.s
	target, other := tgt(relD1, relE1, relR1), tgt(relD1, relE1, relR2)
	relReplace(t, e, ports.TargetScope{SystemID: relSys1}, target, other)
	stamp := func(label string) ports.FactsStamp {
		t.Helper()
		facts, err := s.TargetFactsGet(ctx, target, 10)
		require.NoError(t, err, label)
		many, err := s.TargetStampMany(ctx, []release.ReleaseTarget{target, tgt(relD1, relE1, relR3), other, target}, 10)
		require.NoError(t, err, label)
		require.Len(t, many, 2, label+": the stored targets")
		require.Equal(t, facts.Stamp, many[target], label+": the facts' stamp")
		require.NotEmpty(t, many[target].Rest, label)
		if facts.Release != nil {
			require.Equal(t, facts.Release.ID, many[target].ReleaseID, label)
			require.Equal(t, facts.Release.CreatedAt, many[target].ReleaseCreatedAt, label)
		} else {
			require.Empty(t, many[target].ReleaseID, label)
		}
		return many[target]
	}
	none, err := s.TargetStampMany(ctx, nil, 10)
	require.NoError(t, err)
	require.Empty(t, none)
	prev := stamp("before any change")
	require.True(t, prev.Matches(stamp("read again")), "nothing changed")
	step := func(label string, change func()) {
		t.Helper()
		change()
		next := stamp(label)
		require.False(t, prev.Matches(next), "%s changes the stamp", label)
		prev = next
		require.True(t, prev.Matches(stamp(label+", read again")), "%s: nothing changed since", label)
	}
	r1, r2 := f.release(target, "v1"), f.release(target, "v2")
	step("a desired release", func() {
		_, err := s.DesiredSet(ctx, ports.DesiredRelease{Target: target, ReleaseID: r1.ID})
		require.NoError(t, err)
	})
	step("another desired release", func() {
		_, err := s.DesiredSet(ctx, ports.DesiredRelease{Target: target, ReleaseID: r2.ID})
		require.NoError(t, err)
	})
	step("a job created", func() { relCreateJob(t, e, relJob("j1", r2, release.JobPending, relAt(3))) })
	step("a job moved", func() { relMove(t, e, "j1", release.JobInProgress) })
	step("the deployment changed", func() {
		d, err := s.Deployments().Get(ctx, relD1)
		require.NoError(t, err)
		d.Value.Name = "changed"
		_, err = s.Deployments().Put(ctx, d.Value, d.Version)
		require.NoError(t, err)
	})
	step("the environment changed", func() {
		v, err := s.Environments().Get(ctx, relE1)
		require.NoError(t, err)
		v.Value.Metadata = map[string]string{"k": "changed"}
		_, err = s.Environments().Put(ctx, v.Value, v.Version)
		require.NoError(t, err)
	})
	step("the resource changed", func() {
		v, err := s.Resources().Get(ctx, relR1)
		require.NoError(t, err)
		v.Value.Name = "changed"
		_, err = s.Resources().Put(ctx, v.Value, v.Version)
		require.NoError(t, err)
	})
	step("the agent changed", func() {
		v, err := s.JobAgents().Get(ctx, relAgent)
		require.NoError(t, err)
		v.Value.Name = "changed"
		_, err = s.JobAgents().Put(ctx, v.Value, v.Version)
		require.NoError(t, err)
	})
	step("a policy published", func() {
		relPublishPolicy(t, ctx, s, policy.Policy{ID: "p", Name: "P", Selector: "true", Enabled: true, Priority: 1})
	})
	step("the policy published again", func() {
		relPublishPolicy(t, ctx, s, policy.Policy{ID: "p", Name: "P", Selector: "true", Enabled: false, Priority: 1})
	})
	relCreateJob(t, e, relJob("elsewhere", f.release(other, "v1"), release.JobPending, relAt(5)))
	require.True(t, prev.Matches(stamp("another target's job")), "another target's change leaves the stamp")
}
