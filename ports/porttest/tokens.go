package porttest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Tokens is the conformance suite of ports.Tokens. newStore is called once
// per subtest and must return an empty store; subtests run in parallel.
func Tokens(t *testing.T, newStore func(t *testing.T) ports.Tokens) {
	t.Helper()
	setup := func(t *testing.T) (*testing.T, context.Context, ports.Tokens) {
		t.Parallel()
		return t, t.Context(), newStore(t)
	}
	t.Run("CreateFindList", func(t *testing.T) { tokCreateFindList(setup(t)) })
	t.Run("Refused", func(t *testing.T) { tokRefused(setup(t)) })
	t.Run("Revoke", func(t *testing.T) { tokRevoke(setup(t)) })
	t.Run("AgentsKept", func(t *testing.T) { tokAgentsKept(setup(t)) })
	t.Run("Expiry", func(t *testing.T) { tokExpiry(setup(t)) })
	t.Run("NonceOnce", func(t *testing.T) { tokNonceOnce(setup(t)) })
	t.Run("NonceConcurrent", func(t *testing.T) { tokNonceConcurrent(setup(t)) })
}

var tokT0 = time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.UTC)

func tokCreateFindList(t *testing.T, ctx context.Context, s ports.Tokens) {
	list, err := s.TokenList(ctx)
	require.NoError(t, err)
	require.Empty(t, list)
	b := ports.Token{ID: "b", Name: "ci", Scopes: []ports.Scope{ports.ScopeWrite, ports.ScopeRead}, CreatedAt: tokT0}
	a := ports.Token{ID: "a", Name: "alice", Scopes: []ports.Scope{ports.ScopeApprove}, CreatedAt: tokT0.Add(time.Second)}
	require.NoError(t, s.TokenCreate(ctx, b, []byte("hash-b")))
	require.NoError(t, s.TokenCreate(ctx, a, []byte("hash-a")))
	got, err := s.TokenByHash(ctx, []byte("hash-b"))
	require.NoError(t, err)
	want := b
	want.CreatedAt = ports.StoredTime(b.CreatedAt)
	require.Equal(t, want, got)
	got.Scopes[0] = ports.ScopeAdmin
	again, err := s.TokenByHash(ctx, []byte("hash-b"))
	require.NoError(t, err)
	require.Equal(t, ports.ScopeWrite, again.Scopes[0], "reads return copies")
	_, err = s.TokenByHash(ctx, []byte("hash-x"))
	require.ErrorIs(t, err, ports.ErrNotFound)
	list, err = s.TokenList(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, []string{"a", "b"}, []string{list[0].ID, list[1].ID}, "by id")
}

// tokAgentsKept: an agent token's job agents are stored with it, in
// order, and reads return copies.
func tokAgentsKept(t *testing.T, ctx context.Context, s ports.Tokens) {
	tok := ports.Token{ID: "t1", Name: "runner", Scopes: []ports.Scope{ports.ScopeAgent}, Agents: []string{"web-runner", "api-runner"}, CreatedAt: tokT0}
	require.NoError(t, s.TokenCreate(ctx, tok, []byte("h1")))
	got, err := s.TokenByHash(ctx, []byte("h1"))
	require.NoError(t, err)
	require.Equal(t, []string{"web-runner", "api-runner"}, got.Agents)
	require.True(t, got.ActsFor("api-runner"))
	require.False(t, got.ActsFor("other"))
	got.Agents[0] = "other"
	list, err := s.TokenList(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, []string{"web-runner", "api-runner"}, list[0].Agents, "reads return copies")
}

func tokRefused(t *testing.T, ctx context.Context, s ports.Tokens) {
	ok := ports.Token{ID: "t1", Name: "ci", Scopes: []ports.Scope{ports.ScopeRead}, CreatedAt: tokT0}
	require.NoError(t, s.TokenCreate(ctx, ok, []byte("h1")))
	dupID := ok
	require.ErrorIs(t, s.TokenCreate(ctx, dupID, []byte("h2")), ports.ErrConflict, "a taken id")
	dupHash := ok
	dupHash.ID = "t2"
	require.ErrorIs(t, s.TokenCreate(ctx, dupHash, []byte("h1")), ports.ErrConflict, "a taken hash")
	for name, tc := range map[string]struct {
		tok   ports.Token
		hash  string
		field string
	}{
		"no id":          {ports.Token{Name: "x", Scopes: []ports.Scope{ports.ScopeRead}}, "h3", "id"},
		"no name":        {ports.Token{ID: "t3", Scopes: []ports.Scope{ports.ScopeRead}}, "h3", "name"},
		"no scope":       {ports.Token{ID: "t3", Name: "x"}, "h3", "scopes"},
		"unknown scope":  {ports.Token{ID: "t3", Name: "x", Scopes: []ports.Scope{ports.ScopeRead, "root"}}, "h3", "scopes[1]"},
		"no hash":        {ports.Token{ID: "t3", Name: "x", Scopes: []ports.Scope{ports.ScopeRead}}, "", "hash"},
		"NUL in name":    {ports.Token{ID: "t3", Name: "x\x00", Scopes: []ports.Scope{ports.ScopeRead}}, "h3", "name"},
		"escape in name": {ports.Token{ID: "t3", Name: "x\x1b[31m", Scopes: []ports.Scope{ports.ScopeRead}}, "h3", "name"},
		"unbound agent":  {ports.Token{ID: "t3", Name: "x", Scopes: []ports.Scope{ports.ScopeAgent}}, "h3", "agents"},
		"agents on read": {ports.Token{ID: "t3", Name: "x", Scopes: []ports.Scope{ports.ScopeRead}, Agents: []string{"a"}}, "h3", "agents"},
		"agents on admin": {ports.Token{ID: "t3", Name: "x", Scopes: []ports.Scope{ports.ScopeAgent, ports.ScopeAdmin},
			Agents: []string{"a"}}, "h3", "agents"},
		"empty agent":     {ports.Token{ID: "t3", Name: "x", Scopes: []ports.Scope{ports.ScopeAgent}, Agents: []string{""}}, "h3", "agents[0]"},
		"agent twice":     {ports.Token{ID: "t3", Name: "x", Scopes: []ports.Scope{ports.ScopeAgent}, Agents: []string{"a", "a"}}, "h3", "agents[1]"},
		"escape in agent": {ports.Token{ID: "t3", Name: "x", Scopes: []ports.Scope{ports.ScopeAgent}, Agents: []string{"a\x1b"}}, "h3", "agents[0]"},
	} {
		err := s.TokenCreate(ctx, tc.tok, []byte(tc.hash))
		var fe *release.FieldError
		require.ErrorAs(t, err, &fe, name)
		require.Equal(t, tc.field, fe.Field, name)
	}
	list, err := s.TokenList(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1, "refused writes change nothing")
}

func tokRevoke(t *testing.T, ctx context.Context, s ports.Tokens) {
	tok := ports.Token{ID: "t1", Name: "ci", Scopes: []ports.Scope{ports.ScopeAgent}, Agents: []string{"a"}, CreatedAt: tokT0}
	require.NoError(t, s.TokenCreate(ctx, tok, []byte("h1")))
	require.ErrorIs(t, s.TokenRevoke(ctx, "nope", tokT0), ports.ErrNotFound)
	require.NoError(t, s.TokenRevoke(ctx, "t1", tokT0.Add(time.Minute)))
	require.NoError(t, s.TokenRevoke(ctx, "t1", tokT0.Add(time.Hour)), "revoking twice is fine")
	got, err := s.TokenByHash(ctx, []byte("h1"))
	require.NoError(t, err, "a revoked token is still found")
	require.True(t, got.Revoked())
	require.Equal(t, ports.StoredTime(tokT0.Add(time.Minute)), got.RevokedAt, "the first revocation is kept")
	list, err := s.TokenList(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.True(t, list[0].Revoked())
}

func tokNonceOnce(t *testing.T, ctx context.Context, s ports.Tokens) {
	exp := tokT0.Add(5 * time.Minute)
	ok, err := s.NonceClaim(ctx, "sig-1", tokT0, exp)
	require.NoError(t, err)
	require.True(t, ok, "first claim")
	ok, err = s.NonceClaim(ctx, "sig-1", tokT0.Add(time.Minute), exp)
	require.NoError(t, err)
	require.False(t, ok, "a reused key before it expires")
	ok, err = s.NonceClaim(ctx, "sig-2", tokT0.Add(time.Minute), exp)
	require.NoError(t, err)
	require.True(t, ok, "another key")
	ok, err = s.NonceClaim(ctx, "sig-1", exp, exp.Add(5*time.Minute))
	require.NoError(t, err)
	require.True(t, ok, "an expired key may be claimed again")
}

func tokNonceConcurrent(t *testing.T, ctx context.Context, s ports.Tokens) {
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.NonceClaim(ctx, "race", tokT0, tokT0.Add(time.Minute))
			if err == nil && ok {
				wins.Add(1)
			}
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	require.Equal(t, int32(1), wins.Load(), "exactly one concurrent claim wins")
}

// tokExpiry: an expiry is kept (at stored precision) and listed; one not
// after the creation is refused naming expires_at.
func tokExpiry(t *testing.T, ctx context.Context, s ports.Tokens) {
	exp := ports.Token{ID: "e1", Name: "ci", Scopes: []ports.Scope{ports.ScopeRead}, CreatedAt: tokT0, ExpiresAt: tokT0.Add(720 * time.Hour)}
	require.NoError(t, s.TokenCreate(ctx, exp, []byte("he1")))
	got, err := s.TokenByHash(ctx, []byte("he1"))
	require.NoError(t, err)
	require.True(t, got.ExpiresAt.Equal(ports.StoredTime(exp.ExpiresAt)), "expires_at kept: %v", got.ExpiresAt)
	require.False(t, got.Expired(tokT0.Add(719*time.Hour)))
	require.True(t, got.Expired(tokT0.Add(720*time.Hour)))
	list, err := s.TokenList(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.True(t, list[0].ExpiresAt.Equal(got.ExpiresAt))

	bad := ports.Token{ID: "e2", Name: "ci", Scopes: []ports.Scope{ports.ScopeRead}, CreatedAt: tokT0, ExpiresAt: tokT0}
	err = s.TokenCreate(ctx, bad, []byte("he2"))
	var fe *release.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "expires_at", fe.Field)
	_, err = s.TokenByHash(ctx, []byte("he2"))
	require.ErrorIs(t, err, ports.ErrNotFound, "nothing stored")
}
