package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// Tokens is ports.Tokens in memory: the tokens of one process.
type Tokens struct {
	mu     sync.Mutex
	byID   map[string]ports.Token
	hashes map[string]string // hash → id
	nonces map[string]time.Time
}

// NewTokens returns an empty token store.
func NewTokens() *Tokens {
	return &Tokens{byID: map[string]ports.Token{}, hashes: map[string]string{}, nonces: map[string]time.Time{}}
}

var _ ports.Tokens = (*Tokens)(nil)

// TokenCreate stores t under hash.
func (s *Tokens) TokenCreate(_ context.Context, t ports.Token, hash []byte) error {
	if err := ports.ValidateToken(&t, hash); err != nil {
		return fmt.Errorf("create token %s: %w", t.ID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byID[t.ID]; ok {
		return fmt.Errorf("create token %s: id taken: %w", t.ID, ports.ErrConflict)
	}
	if _, ok := s.hashes[string(hash)]; ok {
		return fmt.Errorf("create token %s: hash taken: %w", t.ID, ports.ErrConflict)
	}
	t.Scopes, t.Agents = slices.Clone(t.Scopes), slices.Clone(t.Agents)
	t.CreatedAt, t.RevokedAt, t.ExpiresAt = ports.StoredTime(t.CreatedAt), ports.StoredTime(t.RevokedAt), ports.StoredTime(t.ExpiresAt)
	s.byID[t.ID] = t
	s.hashes[string(hash)] = t.ID
	return nil
}

// TokenByHash reads the token stored under hash.
func (s *Tokens) TokenByHash(_ context.Context, hash []byte) (ports.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.hashes[string(hash)]
	if !ok {
		return ports.Token{}, fmt.Errorf("token by hash: %w", ports.ErrNotFound)
	}
	return copyToken(s.byID[id]), nil
}

// TokenList lists every token by id.
func (s *Tokens) TokenList(context.Context) ([]ports.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ports.Token, 0, len(s.byID))
	for _, t := range s.byID {
		out = append(out, copyToken(t))
	}
	slices.SortFunc(out, func(a, b ports.Token) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// TokenRevoke revokes a token; the first revocation time is kept.
func (s *Tokens) TokenRevoke(_ context.Context, id string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byID[id]
	if !ok {
		return fmt.Errorf("revoke token %s: %w", id, ports.ErrNotFound)
	}
	if t.RevokedAt.IsZero() {
		t.RevokedAt = ports.StoredTime(at)
		s.byID[id] = t
	}
	return nil
}

// NonceClaim claims key until expiresAt; expired claims are dropped as
// claims are made, so the table holds only live ones.
func (s *Tokens) NonceClaim(_ context.Context, key string, now, expiresAt time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, exp := range s.nonces {
		if !exp.After(now) {
			delete(s.nonces, k)
		}
	}
	if _, ok := s.nonces[key]; ok {
		return false, nil
	}
	s.nonces[key] = expiresAt
	return true, nil
}

func copyToken(t ports.Token) ports.Token {
	t.Scopes, t.Agents = slices.Clone(t.Scopes), slices.Clone(t.Agents)
	return t
}
