package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// Tokens is ports.Tokens on PostgreSQL: one row per token keyed by id with
// a unique hash, and one row per claimed nonce until it expires.
type Tokens struct {
	db *DB
}

// NewTokens returns the token store over db.
func NewTokens(db *DB) *Tokens { return &Tokens{db: db} }

var _ ports.Tokens = (*Tokens)(nil)

// TokenCreate stores t under hash; a taken id or hash is ErrConflict.
func (s *Tokens) TokenCreate(ctx context.Context, t ports.Token, hash []byte) error {
	op := "create token " + t.ID
	if err := ports.ValidateToken(&t, hash); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	t.CreatedAt, t.RevokedAt, t.ExpiresAt = ports.StoredTime(t.CreatedAt), ports.StoredTime(t.RevokedAt), ports.StoredTime(t.ExpiresAt)
	doc, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	res, err := s.db.hotExec(ctx, `INSERT INTO api_tokens (id, hash, doc) VALUES ($1, $2, $3::jsonb) ON CONFLICT DO NOTHING`,
		t.ID, hash, string(doc))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%s: id or hash taken: %w", op, ports.ErrConflict)
	}
	return nil
}

// TokenByHash reads the token stored under hash.
func (s *Tokens) TokenByHash(ctx context.Context, hash []byte) (ports.Token, error) {
	var doc []byte
	err := scanOne(s.db.hotQuery(ctx, `SELECT doc FROM api_tokens WHERE hash = $1`, hash))(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return ports.Token{}, fmt.Errorf("token by hash: %w", ports.ErrNotFound)
	}
	if err != nil {
		return ports.Token{}, fmt.Errorf("token by hash: %w", err)
	}
	var t ports.Token
	if err := json.Unmarshal(doc, &t); err != nil {
		return ports.Token{}, fmt.Errorf("token by hash: decode: %w", err)
	}
	return t, nil
}

// TokenList lists every token by id.
func (s *Tokens) TokenList(ctx context.Context) ([]ports.Token, error) {
	rows, err := s.db.hotQuery(ctx, `SELECT doc FROM api_tokens ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	out, err := scanDocs[ports.Token](rows, "list tokens")
	if out == nil && err == nil {
		out = []ports.Token{}
	}
	return out, err
}

// TokenRevoke revokes a token; the first revocation time is kept.
func (s *Tokens) TokenRevoke(ctx context.Context, id string, at time.Time) error {
	op := "revoke token " + id
	at = ports.StoredTime(at)
	res, err := s.db.hotExec(ctx, `UPDATE api_tokens SET doc = doc || jsonb_build_object('revoked_at', $2::text)
		WHERE id = $1 AND NOT doc ? 'revoked_at'`, id, at.Format(time.RFC3339Nano))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var one int
	err = scanOne(s.db.hotQuery(ctx, `SELECT 1 FROM api_tokens WHERE id = $1`, id))(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, ports.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil // already revoked
}

// NonceClaim claims key until expiresAt in one statement: a new key is
// inserted, an expired one taken over, a live one refused.
func (s *Tokens) NonceClaim(ctx context.Context, key string, now, expiresAt time.Time) (bool, error) {
	if _, err := s.db.hotExec(ctx, `DELETE FROM api_nonces WHERE expires_at <= $1`, now); err != nil {
		return false, fmt.Errorf("claim nonce: %w", err)
	}
	res, err := s.db.hotExec(ctx, `INSERT INTO api_nonces (key, expires_at) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE api_nonces.expires_at <= $3`,
		key, expiresAt, now)
	if err != nil {
		return false, fmt.Errorf("claim nonce: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}
