package revision

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// allStates is every lifecycle including the Absent pseudo-state.
var allStates = []Lifecycle{Absent, Draft, Proposed, Published, DeletionProposed}

// TestAllowedEveryPair checks every from → to pair against the rules as the
// issue states them, written out here independently of Edges.
func TestAllowedEveryPair(t *testing.T) {
	t.Parallel()
	type pair struct{ from, to Lifecycle }
	want := map[pair]string{
		{Absent, Draft}:               "objects are created only as Draft",
		{Draft, Proposed}:             "Draft ↔ Proposed",
		{Proposed, Draft}:             "Draft ↔ Proposed",
		{Proposed, Published}:         "Proposed → Published by approval",
		{Published, DeletionProposed}: "Published → DeletionProposed",
		{DeletionProposed, Published}: "and back again",
		{Draft, Absent}:               "Draft may be deleted",
		{Proposed, Absent}:            "Proposed may be deleted",
		{DeletionProposed, Absent}:    "DeletionProposed may be deleted",
	}
	for _, from := range allStates {
		for _, to := range allStates {
			reason, ok := want[pair{from, to}]
			t.Run(fmt.Sprintf("%s→%s", from, to), func(t *testing.T) {
				t.Parallel()
				require.Equal(t, ok, Allowed(from, to), reason)
			})
		}
	}
}

// TestApplyEveryOp checks every (from, op) against the documented result.
func TestApplyEveryOp(t *testing.T) {
	t.Parallel()
	type key struct {
		from Lifecycle
		op   Op
	}
	want := map[key]Lifecycle{
		{Absent, OpCreate}:                      Draft,
		{Draft, OpPropose}:                      Proposed,
		{Proposed, OpUnpropose}:                 Draft,
		{Proposed, OpReject}:                    Draft,
		{Proposed, OpApprove}:                   Published,
		{Published, OpProposeDelete}:            DeletionProposed,
		{DeletionProposed, OpUndoProposeDelete}: Published,
		{Draft, OpDelete}:                       Absent,
		{Proposed, OpDelete}:                    Absent,
		{DeletionProposed, OpDelete}:            Absent,
	}
	for _, from := range allStates {
		for _, op := range Ops {
			to, ok := want[key{from, op}]
			t.Run(fmt.Sprintf("%s/%s", from, op), func(t *testing.T) {
				t.Parallel()
				got, err := Apply(from, op)
				if ok {
					require.NoError(t, err)
					require.Equal(t, to, got)
					return
				}
				require.ErrorIs(t, err, ErrInvalidTransition)
				var te *TransitionError
				require.ErrorAs(t, err, &te)
				require.Equal(t, from, te.From)
				require.Equal(t, op, te.Op)
				require.Contains(t, err.Error(), string(op))
			})
		}
	}
}

// TestCheckUpdate covers each store-level rule.
func TestCheckUpdate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		u    Update
		want error
	}{
		{"draft content edit", Update{From: Draft, To: Draft, ContentChanged: true}, nil},
		{"proposed content edit", Update{From: Proposed, To: Proposed, ContentChanged: true}, nil},
		{"propose with edit", Update{From: Draft, To: Proposed, ContentChanged: true}, nil},
		{"published metadata only", Update{From: Published, To: Published}, nil},
		{"deletion-proposed metadata only", Update{From: DeletionProposed, To: DeletionProposed}, nil},
		{"approve", Update{From: Proposed, To: Published, ApprovedBy: "ana"}, nil},
		{"approve without approver", Update{From: Proposed, To: Published}, ErrValidation},
		{"approve changing content", Update{From: Proposed, To: Published, ContentChanged: true, ApprovedBy: "ana"}, ErrImmutable},
		{"draft straight to published", Update{From: Draft, To: Published, ApprovedBy: "ana"}, ErrInvalidTransition},
		{"published back to draft", Update{From: Published, To: Draft}, ErrInvalidTransition},
		{"published content edit", Update{From: Published, To: Published, ContentChanged: true}, ErrImmutable},
		{"deletion-proposed content edit", Update{From: DeletionProposed, To: DeletionProposed, ContentChanged: true}, ErrImmutable},
		{"propose delete", Update{From: Published, To: DeletionProposed}, nil},
		{"undo propose delete", Update{From: DeletionProposed, To: Published}, nil},
		{"undo propose delete needs no approver", Update{From: DeletionProposed, To: Published}, nil},
		{"update to absent", Update{From: Draft, To: Absent}, ErrValidation},
		{"unknown target", Update{From: Draft, To: "archived"}, ErrValidation},
		{"unknown stored", Update{From: "archived", To: Draft}, ErrValidation},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := CheckUpdate(tc.u)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}
}

// TestCheckContentChange: only open drafts are editable.
func TestCheckContentChange(t *testing.T) {
	t.Parallel()
	for _, l := range Lifecycles {
		err := CheckContentChange(l)
		if l == Draft || l == Proposed {
			require.NoError(t, err, l)
		} else {
			require.ErrorIs(t, err, ErrImmutable, l)
		}
	}
}

// TestNextNumber: a published revision's number follows the highest ever.
func TestNextNumber(t *testing.T) {
	t.Parallel()
	require.Equal(t, 1, NextNumber(0))
	require.Equal(t, 8, NextNumber(7))
}

// TestObjectValidate names the failing field.
func TestObjectValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		obj   Object
		field string
	}{
		{Object{KindPolicy, "ok-name.v2"}, ""},
		{Object{KindWorkflowTemplate, "a"}, ""},
		{Object{"template", "x"}, "kind"},
		{Object{KindPolicy, ""}, "name"},
		{Object{KindPolicy, "Upper"}, "name"},
		{Object{KindPolicy, "-lead"}, "name"},
		{Object{KindPolicy, "trail."}, "name"},
		{Object{KindPolicy, string(make([]byte, MaxNameLen+1))}, "name"},
	}
	for _, tc := range cases {
		err := tc.obj.Validate()
		if tc.field == "" {
			require.NoError(t, err, tc.obj)
			continue
		}
		require.ErrorIs(t, err, ErrValidation, tc.obj)
		require.Contains(t, err.Error(), tc.field+":", tc.obj)
	}
}

// TestErrors checks the typed errors match their sentinels and wrap.
func TestErrors(t *testing.T) {
	t.Parallel()
	cause := errors.New("store conflict")
	c := &ConflictError{Message: "another change to policy/x is in progress", Err: cause}
	require.ErrorIs(t, c, ErrConflict)
	require.ErrorIs(t, c, cause)
	require.Equal(t, "another change to policy/x is in progress", c.Error())
	require.ErrorIs(t, fmt.Errorf("wrapped: %w", Conflict("x %d", 1)), ErrConflict)

	p1, p2 := errors.New("name: required"), errors.New("content: not an object")
	v := Invalid(nil, p1, Invalid(p2))
	require.ErrorIs(t, v, ErrValidation)
	require.ErrorIs(t, v, p1)
	require.ErrorIs(t, v, p2)
	var ve *ValidationError
	require.ErrorAs(t, v, &ve)
	require.Len(t, ve.Problems, 2, "nested validation errors are flattened")
	require.NoError(t, Invalid(nil, nil))

	require.ErrorIs(t, &TransitionError{From: Draft, To: Published}, ErrInvalidTransition)
	require.NotErrorIs(t, &TransitionError{From: Draft, To: Published}, ErrConflict)
}

// TestWalkProperty: random operation walks over the table keep the
// documented guarantees.
func TestWalkProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		state := Absent
		steps := rapid.IntRange(1, 40).Draw(t, "steps")
		for range steps {
			op := rapid.SampledFrom(Ops).Draw(t, "op")
			next, err := Apply(state, op)
			if err != nil {
				if !errors.Is(err, ErrInvalidTransition) {
					t.Fatalf("apply %s from %s: %v is not an invalid transition", op, state, err)
				}
				continue
			}
			if state == Absent && next != Draft {
				t.Fatalf("%s created a %s revision, want draft", op, next)
			}
			if next == Published && state.Open() && op != OpApprove {
				t.Fatalf("%s published a %s revision without approval", op, state)
			}
			if state == Published && next == Absent {
				t.Fatalf("%s deleted a published revision", op)
			}
			if state.IsPublished() && next.Open() {
				t.Fatalf("%s reopened a %s revision as %s", op, state, next)
			}
			if next != Absent && !next.Valid() {
				t.Fatalf("%s led to invalid state %q", op, next)
			}
			if !Allowed(state, next) {
				t.Fatalf("Apply and Allowed disagree on %s → %s", state, next)
			}
			state = next
		}
	})
}

// BenchmarkCheckUpdate measures the per-write rule check every store runs.
func BenchmarkCheckUpdate(b *testing.B) {
	b.ReportAllocs()
	u := Update{From: Proposed, To: Published, ApprovedBy: "ana"}
	for b.Loop() {
		if err := CheckUpdate(u); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApply measures one lifecycle lookup.
func BenchmarkApply(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Apply(Published, OpProposeDelete); err != nil {
			b.Fatal(err)
		}
	}
}
