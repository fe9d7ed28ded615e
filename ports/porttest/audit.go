package porttest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
)

// AuditLog is the conformance suite of ports.AuditLog. newLog is called once
// per subtest and must return an empty log; subtests run in parallel.
func AuditLog(t *testing.T, newLog func(t *testing.T) ports.AuditLog) {
	t.Helper()
	t.Run("AppendList", func(t *testing.T) {
		t.Parallel()
		auditAppendList(t, t.Context(), newLog(t))
	})
}

func auditAppendList(t *testing.T, ctx context.Context, l ports.AuditLog) {
	list, err := l.AuditList(ctx, ports.AuditListParams{})
	require.NoError(t, err)
	require.Empty(t, list)
	at := time.Date(2026, 11, 28, 6, 0, 0, 123456789, time.UTC)
	var seqs []int64
	for i, e := range []ports.AuditEntry{
		{At: at, Actor: "ci", Source: "10.0.0.1:5000", Action: "putDeployment", Method: "PUT", Path: "/api/v1/deployments/web", Kind: "deployments", ID: "web", Summary: "changed", Status: 200},
		{At: at.Add(time.Second), Actor: "alice", Action: "approveVersion", Method: "POST", Path: "/api/v1/versions/web-v2/approvals", Kind: "versions", ID: "web-v2", Status: 201},
		{At: at.Add(2 * time.Second), Actor: "ci", Action: "putDeployment", Method: "PUT", Path: "/api/v1/deployments/api", Kind: "deployments", ID: "api", Status: 200},
	} {
		got, err := l.AuditAppend(ctx, e)
		require.NoError(t, err)
		require.Positive(t, got.Seq)
		if i > 0 {
			require.Greater(t, got.Seq, seqs[i-1], "sequence numbers increase")
		}
		seqs = append(seqs, got.Seq)
		e.Seq, e.At = got.Seq, ports.StoredTime(e.At)
		require.Equal(t, e, got)
	}
	all, err := l.AuditList(ctx, ports.AuditListParams{})
	require.NoError(t, err)
	require.Len(t, all, 3)
	require.Equal(t, []int64{seqs[2], seqs[1], seqs[0]}, []int64{all[0].Seq, all[1].Seq, all[2].Seq}, "newest first")
	require.Equal(t, "10.0.0.1:5000", all[2].Source)
	require.True(t, all[2].At.Equal(ports.StoredTime(at)))

	byActor, err := l.AuditList(ctx, ports.AuditListParams{Actor: "ci"})
	require.NoError(t, err)
	require.Len(t, byActor, 2)
	byObject, err := l.AuditList(ctx, ports.AuditListParams{Kind: "deployments", ID: "web"})
	require.NoError(t, err)
	require.Len(t, byObject, 1)
	require.Equal(t, "changed", byObject[0].Summary)

	page, err := l.AuditList(ctx, ports.AuditListParams{Limit: 2})
	require.NoError(t, err)
	require.Len(t, page, 2)
	rest, err := l.AuditList(ctx, ports.AuditListParams{Limit: 2, Before: page[1].Seq})
	require.NoError(t, err)
	require.Len(t, rest, 1)
	require.Equal(t, seqs[0], rest[0].Seq)
}
