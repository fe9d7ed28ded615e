package ports_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
)

// TestPolicyOfIsMemoizedByContent: reading the same document again gives
// the same policy under each revision's own name, number and time, a
// caller's change to its rules does not reach the next reader, and another
// document decodes anew.
func TestPolicyOfIsMemoizedByContent(t *testing.T) {
	doc := json.RawMessage(`{"workspace_id":"ws","name":"gate","enabled":true,"priority":3,"rules":[
		{"id":"soak","type":"gradualRollout","rollout_type":"linear","time_scale_interval":60},
		{"id":"wait","type":"gradualRollout","rollout_type":"linear-normalized","time_scale_interval":600}]}`)
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	first, err := ports.PolicyOf(ports.Revision{Name: "a", Revision: 1, Content: doc, PublishedAt: at})
	require.NoError(t, err)
	require.Equal(t, "a", first.Value.ID)
	require.Len(t, first.Value.Rules, 2)
	require.Equal(t, policy.GradualRollout{RolloutType: policy.RolloutLinear, TimeScaleInterval: 60}, first.Value.Rules[0].Spec)

	first.Value.Rules[0] = policy.Rule{ID: "changed", Spec: policy.GradualRollout{RolloutType: policy.RolloutLinear}}
	first.Value.Rules = first.Value.Rules[:1]

	again, err := ports.PolicyOf(ports.Revision{Name: "b", Revision: 7, Content: doc, PublishedAt: at.Add(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, "b", again.Value.ID)
	require.Equal(t, int64(7), again.Version)
	require.Equal(t, at.Add(time.Hour), again.UpdatedAt)
	require.Len(t, again.Value.Rules, 2, "a caller's change reached the memo")
	require.Equal(t, "soak", again.Value.Rules[0].ID, "a caller's change reached the memo")

	other := json.RawMessage(`{"workspace_id":"ws","name":"gate","enabled":false,"rules":[]}`)
	off, err := ports.PolicyOf(ports.Revision{Name: "a", Revision: 2, Content: other})
	require.NoError(t, err)
	require.False(t, off.Value.Enabled)
	require.Empty(t, off.Value.Rules)

	_, err = ports.PolicyOf(ports.Revision{Name: "bad", Revision: 1, Content: json.RawMessage(`{"rules":[{"id":"x","type":"nosuch"}]}`)})
	require.ErrorContains(t, err, "policy bad revision 1")
}
