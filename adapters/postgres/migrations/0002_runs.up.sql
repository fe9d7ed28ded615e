-- Runs of every kind. body holds the kind's row type; the other columns are
-- the ones queries need. terminal is computed on every write from the kind's
-- state machine so the resync listing can use a partial index.
CREATE TABLE runs (
    kind        text        NOT NULL,
    -- "C" collation: ids page in byte order, as in every adapter.
    id          text        COLLATE "C" NOT NULL,
    state       text        NOT NULL,
    version     bigint      NOT NULL CHECK (version > 0),
    repo        text        NOT NULL DEFAULT '',
    terminal    boolean     NOT NULL,
    body        jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(body) = 'object'),
    settings    jsonb       NOT NULL DEFAULT '{}',
    pod         jsonb,
    pr          jsonb,
    heartbeat   timestamptz,
    depends_on  text[],
    subtasks    jsonb,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (kind, id)
);

-- Resync: non-terminal runs of a kind in id order.
CREATE INDEX runs_nonterminal_idx ON runs (kind, id) WHERE NOT terminal;

-- Capacity: slot-holding states are never terminal, so counts scan only the
-- live runs, by kind and state, with repo for the per-repo count.
CREATE INDEX runs_live_state_idx ON runs (kind, state, repo) WHERE NOT terminal;
