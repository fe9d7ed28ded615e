-- One row per running serve process: its own heartbeat (ports.Liveness),
-- apart from the leases it holds, so that a live but slow process's work
-- is told apart from a dead one's.
CREATE TABLE process_liveness (
    owner       text PRIMARY KEY,
    alive_until timestamptz NOT NULL
);
