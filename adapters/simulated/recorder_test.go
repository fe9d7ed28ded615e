package simulated_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/reconcilerhq/reconciler/adapters/simulated"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile"
)

func TestAgentRuntimeConformance(t *testing.T) {
	t.Parallel()
	porttest.AgentRuntime(t, func(*testing.T) porttest.AgentRuntimeFixture {
		a := simulated.NewAgentRuntime()
		return porttest.AgentRuntimeFixture{
			Runtime: a,
			Launched: func(ref reconcile.RunRef) int {
				return count(a.Launches(), func(p ports.AgentLaunchParams) bool { return p.Ref == ref })
			},
			Released: func(ref reconcile.RunRef) int {
				return count(a.Releases(), func(r reconcile.RunRef) bool { return r == ref })
			},
		}
	})
}

func TestCodeHostConformance(t *testing.T) {
	t.Parallel()
	var prs atomic.Int64
	porttest.CodeHost(t, func(*testing.T) porttest.CodeHostFixture {
		c := simulated.NewCodeHost()
		return porttest.CodeHostFixture{
			Host: c,
			// The recorder knows no pull requests: any URL is one it accepts.
			OpenPR: func(*testing.T) (string, string) {
				n := prs.Add(1)
				return fmt.Sprintf("https://git.example.com/acme/api/pull/%d", n), fmt.Sprintf("%040x", n)
			},
			Merged: func(url string) int {
				return count(c.Merges(), func(p ports.PRMergeParams) bool { return p.URL == url })
			},
			Submitted: func(url string) int {
				return count(c.Reviews(), func(p ports.PRSubmitParams) bool { return p.URL == url })
			},
		}
	})
}

// count returns how many items match.
func count[T any](items []T, match func(T) bool) int {
	n := 0
	for _, it := range items {
		if match(it) {
			n++
		}
	}
	return n
}
