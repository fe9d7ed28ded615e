package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReleasesPod(t *testing.T) {
	t.Parallel()
	agent := func(st State, held bool, in Intent) *AgentSnapshot {
		s := agentSetup(t)
		s.Run.State, s.Run.PodHeld, s.Run.Reconcile.Intent = st, held, in
		if st == AgentRunning || st == AgentProvisioning {
			s.Pod = &Pod{Name: "p", Phase: PodRunning}
			s.Run.TurnStartedAt = s.Now.Add(-time.Minute)
		}
		return s
	}
	repo := func(edit func(s *RepoSnapshot)) *RepoSnapshot {
		s := repoSetup(t)
		edit(s)
		return s
	}
	exit0 := 0
	rows := []struct {
		name    string
		snap    Snapshot
		release bool
	}{
		{"pausing a running agent releases its pod", agent(AgentRunning, false, IntentPause), true},
		{"pausing a provisioning agent releases its pod", agent(AgentProvisioning, false, IntentPause), true},
		{"pausing an idle agent that holds a pod releases it", agent(AgentIdle, true, IntentPause), true},
		{"pausing an idle agent without a pod releases nothing", agent(AgentIdle, false, IntentPause), false},
		{"archiving a running agent releases its pod", agent(AgentRunning, false, IntentArchive), true},
		{"archiving an idle agent that holds a pod releases it", agent(AgentIdle, true, IntentArchive), true},
		{"archiving a paused agent releases nothing more", agent(AgentPaused, false, IntentArchive), false},
		{"restarting a running agent releases its pod", agent(AgentRunning, false, IntentRestart), true},
		{"an idle on-demand agent's ReleasePod releases", agent(AgentIdle, true, IntentNone), true},
		{"a turn starting keeps the pod", func() Snapshot {
			s := agent(AgentProvisioning, false, IntentNone)
			s.Run.TurnStartedAt = time.Time{}
			return s
		}(), false},
		{"cancelling a running repo run releases its pod",
			repo(func(s *RepoSnapshot) { s.Run.Reconcile.Intent = IntentCancel }), true},
		{"a stalled repo run releases its pod",
			repo(func(s *RepoSnapshot) { s.Heartbeat = s.Now.Add(-time.Hour) }), true},
		{"a finished repo agent's pod is released on pr_opened",
			repo(func(s *RepoSnapshot) {
				s.Run.PR = *repoTestFields(nil)
				s.Pod.Phase, s.Pod.ExitCode = PodTerminated, &exit0
			}), true},
		{"a pod becoming ready keeps it",
			repo(func(s *RepoSnapshot) { s.Run.State = RepoProvisioning }), false},
		{"a launch from queued releases nothing",
			repo(func(s *RepoSnapshot) { s.Run.State = RepoQueued }), false},
		{"an auto-resume from pr_opened releases nothing (no pod runs there)",
			repo(repoWithPR(func(pr *PullRequest) { pr.Checks = ChecksFailing })), false},
		{"a healthy running repo run keeps its pod", repo(func(*RepoSnapshot) {}), false},
		{"a PR review re-run on push releases the superseded review's pod", func() Snapshot {
			s := prReviewSetup(t)
			s.Run.State, s.Run.ReviewedSHA, s.Settings.RerunOnPush = ReviewRunning, "old", true
			s.Pod = &Pod{Name: "rv", Phase: PodRunning}
			return s
		}(), true},
		{"cancelling a running standalone run releases its pod", func() Snapshot {
			s := standaloneSetup(t)
			s.Run.Reconcile.Intent = IntentCancel
			return s
		}(), true},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			a := Decide(row.snap)
			require.Equal(t, row.release, ReleasesPod(row.snap, a), "action %#v", a)
		})
	}
}
