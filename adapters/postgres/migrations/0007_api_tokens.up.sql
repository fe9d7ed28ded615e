-- API tokens (ports.Tokens): only the hash of each secret is stored.
CREATE TABLE api_tokens (
    id         text COLLATE "C" PRIMARY KEY,
    hash       bytea NOT NULL UNIQUE,
    doc        jsonb NOT NULL
);

-- Signatures already used by signed requests, kept until they expire.
CREATE TABLE api_nonces (
    key        text COLLATE "C" PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX api_nonces_expires_idx ON api_nonces (expires_at);
