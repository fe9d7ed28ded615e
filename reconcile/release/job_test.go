package release

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestJobStatusPartition(t *testing.T) {
	t.Parallel()
	active := map[JobStatus]bool{JobPending: true, JobQueued: true, JobInProgress: true, JobActionRequired: true}
	for _, s := range JobStatuses {
		require.True(t, s.Valid())
		require.Equal(t, active[s], s.IsActive(), s)
		require.NotEqual(t, s.IsActive(), s.IsTerminal(), "%s is exactly one of active and terminal", s)
	}
	require.False(t, JobStatus("bogus").IsActive())
	require.False(t, JobStatus("bogus").IsTerminal())
}

func TestJobEdges(t *testing.T) {
	t.Parallel()
	for from, tos := range JobEdges {
		require.True(t, from.IsActive(), "only active statuses have edges: %s", from)
		for _, to := range tos {
			require.True(t, to.Valid())
			require.NotEqual(t, from, to)
			require.True(t, from.CanBecome(to))
		}
	}
	for _, s := range JobStatuses {
		if s.IsTerminal() {
			for _, to := range JobStatuses {
				require.False(t, s.CanBecome(to), "terminal %s never changes", s)
			}
		}
	}
}

func TestJobFinishedAt(t *testing.T) {
	t.Parallel()
	c, s, d := time.Unix(1, 0), time.Unix(2, 0), time.Unix(3, 0)
	require.Equal(t, d, (&Job{CreatedAt: c, StartedAt: s, CompletedAt: d}).FinishedAt())
	require.Equal(t, s, (&Job{CreatedAt: c, StartedAt: s}).FinishedAt())
	require.Equal(t, c, (&Job{CreatedAt: c}).FinishedAt())
}

func TestPolicySkipApplies(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	tgt := ReleaseTarget{"d", "e", "r"}
	tests := []struct {
		name string
		skip PolicySkip
		want bool
	}{
		{"version and rule, any scope", PolicySkip{VersionID: "v", RuleID: "rule"}, true},
		{"other version", PolicySkip{VersionID: "v2", RuleID: "rule"}, false},
		{"other rule", PolicySkip{VersionID: "v", RuleID: "rule2"}, false},
		{"same environment", PolicySkip{VersionID: "v", RuleID: "rule", EnvironmentID: "e"}, true},
		{"other environment", PolicySkip{VersionID: "v", RuleID: "rule", EnvironmentID: "e2"}, false},
		{"same resource", PolicySkip{VersionID: "v", RuleID: "rule", ResourceID: "r"}, true},
		{"other resource", PolicySkip{VersionID: "v", RuleID: "rule", ResourceID: "r2"}, false},
		{"unexpired", PolicySkip{VersionID: "v", RuleID: "rule", ExpiresAt: now.Add(time.Second)}, true},
		{"expired at now", PolicySkip{VersionID: "v", RuleID: "rule", ExpiresAt: now}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tt.skip.Applies("v", "rule", tgt, now))
		})
	}
}

// TestValidateLinks: one case per rule of ValidateLinks, with the field it
// names.
func TestValidateLinks(t *testing.T) {
	t.Parallel()
	full := map[string]string{}
	for i := range MaxJobLinks {
		full[fmt.Sprintf("l%02d", i)] = "https://ci.example/"
	}
	require.NoError(t, ValidateLinks("links", full), "exactly the bound")
	require.NoError(t, ValidateLinks("links", nil))
	require.NoError(t, ValidateLinks("links", map[string]string{"logs": "http://ci.example:8080/run/7?x=1#l2"}))
	over := maps.Clone(full)
	over["one-more"] = "https://ci.example/"
	for name, c := range map[string]struct {
		links map[string]string
		field string
	}{
		"too many":       {over, "links"},
		"empty name":     {map[string]string{"": "https://ci.example/"}, "links"},
		"long name":      {map[string]string{strings.Repeat("n", MaxLinkNameLength+1): "https://ci.example/"}, "links"},
		"long url":       {map[string]string{"a": "https://ci.example/" + strings.Repeat("x", MaxLinkURLLength)}, "links.a"},
		"ftp":            {map[string]string{"a": "ftp://ci.example/"}, "links.a"},
		"javascript":     {map[string]string{"a": "javascript:alert(1)"}, "links.a"},
		"relative":       {map[string]string{"a": "/run/7"}, "links.a"},
		"no host":        {map[string]string{"a": "https:///run/7"}, "links.a"},
		"unparsable":     {map[string]string{"a": "https://ci.example/%zz"}, "links.a"},
		"first in order": {map[string]string{"b": "ftp://x", "a": "ftp://x"}, "links.a"},
		"empty url":      {map[string]string{"a": ""}, "links.a"},
	} {
		err := ValidateLinks("links", c.links)
		var fe *FieldError
		require.ErrorAs(t, err, &fe, name)
		require.Equal(t, c.field, fe.Field, name)
	}
	j := Job{ID: "j", ReleaseID: "r", TargetKey: "d:e:r", Status: JobPending, CreatedAt: time.Unix(1, 0), Links: map[string]string{"a": "ftp://x"}}
	var fe *FieldError
	require.ErrorAs(t, j.Validate(), &fe, "a job validates its links")
	require.Equal(t, "links.a", fe.Field)
}
