-- Environment progression's aggregate (policy.ProgressionSummary), kept in
-- the same statement as each job's and target's write so that reading it
-- costs O(1) whatever an environment's size (it replaces reading every
-- target's newest terminal job once per batch, N²/B over a rollout).
--
-- release_progression_targets: per deployment, environment, version and
-- existing target, the newest terminal job of the version (by created_at,
-- id) with its status, verification and finish time (completed_at, else
-- started_at, else created_at: release.Job.FinishedAt).
CREATE TABLE release_progression_targets (
    deployment_id   text        COLLATE "C" NOT NULL,
    environment_id  text        COLLATE "C" NOT NULL,
    version_id      text        COLLATE "C" NOT NULL,
    target_key      text        COLLATE "C" NOT NULL,
    job_created_at  timestamptz NOT NULL,
    job_id          text        COLLATE "C" NOT NULL,
    status          text        COLLATE "C" NOT NULL,
    verification    text        COLLATE "C" NOT NULL,
    finished_at     timestamptz NOT NULL,
    PRIMARY KEY (deployment_id, environment_id, version_id, target_key)
);
-- The latest finish per outcome, recomputed in O(log n) when a target
-- leaves an outcome.
CREATE INDEX release_progression_targets_outcome_idx ON release_progression_targets
    (deployment_id, environment_id, version_id, status, verification, finished_at);
-- A removed target's rows.
CREATE INDEX release_progression_targets_target_idx ON release_progression_targets (target_key);

-- release_progression_outcomes: the count of targets per outcome (status,
-- verification) of their row above, and the latest finish among them.
CREATE TABLE release_progression_outcomes (
    deployment_id   text        COLLATE "C" NOT NULL,
    environment_id  text        COLLATE "C" NOT NULL,
    version_id      text        COLLATE "C" NOT NULL,
    status          text        COLLATE "C" NOT NULL,
    verification    text        COLLATE "C" NOT NULL,
    targets         bigint      NOT NULL CHECK (targets >= 0),
    latest_at       timestamptz,
    PRIMARY KEY (deployment_id, environment_id, version_id, status, verification)
);

-- release_progression_scopes: the count of a deployment's targets in an
-- environment.
CREATE TABLE release_progression_scopes (
    deployment_id   text   COLLATE "C" NOT NULL,
    environment_id  text   COLLATE "C" NOT NULL,
    targets         bigint NOT NULL CHECK (targets >= 0),
    PRIMARY KEY (deployment_id, environment_id)
);

-- release_progression_newest is, of the jobs given, the newest terminal
-- job of each (deployment, environment, version, target) as its row.
CREATE FUNCTION release_progression_newest(jobs release_jobs[]) RETURNS SETOF release_progression_targets
LANGUAGE sql STABLE AS $$
    SELECT DISTINCT ON (j.deployment_id, j.environment_id, j.version_id, j.target_key)
        j.deployment_id, j.environment_id, j.version_id, j.target_key, j.created_at, j.id, j.status,
        COALESCE(j.doc->>'verification', ''),
        COALESCE((j.doc->>'completed_at')::timestamptz, (j.doc->>'started_at')::timestamptz, j.created_at)
    FROM unnest(jobs) j
    WHERE j.status IN ('successful', 'failure', 'cancelled', 'skipped', 'invalidJobAgent', 'invalidIntegration', 'externalRunNotFound')
    ORDER BY j.deployment_id, j.environment_id, j.version_id, j.target_key, j.created_at DESC, j.id DESC
$$;

-- The current state, before the triggers below keep it.
INSERT INTO release_progression_scopes (deployment_id, environment_id, targets)
SELECT deployment_id, environment_id, count(*) FROM release_targets GROUP BY 1, 2;

INSERT INTO release_progression_targets (deployment_id, environment_id, version_id, target_key,
    job_created_at, job_id, status, verification, finished_at)
SELECT * FROM release_progression_newest(ARRAY(SELECT j FROM release_jobs j
    WHERE EXISTS (SELECT 1 FROM release_targets t WHERE t.key = j.target_key)));

INSERT INTO release_progression_outcomes (deployment_id, environment_id, version_id, status, verification, targets, latest_at)
SELECT deployment_id, environment_id, version_id, status, verification, count(*), max(finished_at)
FROM release_progression_targets GROUP BY 1, 2, 3, 4, 5;

-- A change of the outcome rows: n targets joined (n > 0) or left (n < 0).
CREATE TYPE release_progression_delta AS (
    deployment_id text, environment_id text, version_id text, status text, verification text, n bigint);

-- release_progression_apply applies deltas to the outcome rows. It locks
-- every touched row in key order first (creating missing ones), so
-- concurrent writers never deadlock on them; the update that follows is a
-- later statement, whose snapshot (READ COMMITTED) holds every earlier
-- writer of those rows, so the latest finish it recomputes from the
-- per-target rows through their index is exact.
CREATE FUNCTION release_progression_apply(ds release_progression_delta[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF cardinality(ds) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO release_progression_outcomes (deployment_id, environment_id, version_id, status, verification, targets)
    SELECT DISTINCT d.deployment_id, d.environment_id, d.version_id, d.status, d.verification, 0 FROM unnest(ds) d
    ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT DO NOTHING;
    PERFORM 1 FROM release_progression_outcomes o
    WHERE (o.deployment_id, o.environment_id, o.version_id, o.status, o.verification) IN
        (SELECT d.deployment_id, d.environment_id, d.version_id, d.status, d.verification FROM unnest(ds) d)
    ORDER BY o.deployment_id, o.environment_id, o.version_id, o.status, o.verification
    FOR UPDATE OF o;
    UPDATE release_progression_outcomes o SET targets = o.targets + g.n,
        latest_at = (SELECT max(p.finished_at) FROM release_progression_targets p
            WHERE p.deployment_id = o.deployment_id AND p.environment_id = o.environment_id
                AND p.version_id = o.version_id AND p.status = o.status AND p.verification = o.verification)
    FROM (SELECT d.deployment_id, d.environment_id, d.version_id, d.status, d.verification, sum(d.n) AS n
        FROM unnest(ds) d GROUP BY 1, 2, 3, 4, 5) g
    WHERE o.deployment_id = g.deployment_id AND o.environment_id = g.environment_id
        AND o.version_id = g.version_id AND o.status = g.status AND o.verification = g.verification;
END $$;

CREATE FUNCTION release_progression_targets_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM release_progression_apply(ARRAY(SELECT ROW(a.deployment_id, a.environment_id, a.version_id,
        a.status, a.verification, 1)::release_progression_delta FROM added a));
    RETURN NULL;
END $$;
CREATE FUNCTION release_progression_targets_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM release_progression_apply(ARRAY(
        SELECT ROW(a.deployment_id, a.environment_id, a.version_id, a.status, a.verification, 1)::release_progression_delta FROM added a
        UNION ALL
        SELECT ROW(r.deployment_id, r.environment_id, r.version_id, r.status, r.verification, -1)::release_progression_delta FROM removed r));
    RETURN NULL;
END $$;
CREATE FUNCTION release_progression_targets_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM release_progression_apply(ARRAY(SELECT ROW(r.deployment_id, r.environment_id, r.version_id,
        r.status, r.verification, -1)::release_progression_delta FROM removed r));
    RETURN NULL;
END $$;
CREATE TRIGGER release_progression_targets_insert AFTER INSERT ON release_progression_targets
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION release_progression_targets_added();
CREATE TRIGGER release_progression_targets_update AFTER UPDATE ON release_progression_targets
    REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION release_progression_targets_changed();
CREATE TRIGGER release_progression_targets_delete AFTER DELETE ON release_progression_targets
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION release_progression_targets_removed();

-- A job written terminal (or a terminal job rewritten, e.g. its
-- verification) becomes its target's row when it is the newest terminal
-- job of its version there.
CREATE FUNCTION release_progression_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO release_progression_targets AS p (deployment_id, environment_id, version_id, target_key,
        job_created_at, job_id, status, verification, finished_at)
    SELECT * FROM release_progression_newest(ARRAY(SELECT j::release_jobs FROM changed j
        WHERE EXISTS (SELECT 1 FROM release_targets t WHERE t.key = j.target_key)))
    ON CONFLICT (deployment_id, environment_id, version_id, target_key) DO UPDATE SET
        job_created_at = excluded.job_created_at, job_id = excluded.job_id, status = excluded.status,
        verification = excluded.verification, finished_at = excluded.finished_at
    WHERE (excluded.job_created_at, excluded.job_id) >= (p.job_created_at, p.job_id)
        AND (p.job_id, p.status, p.verification, p.finished_at) IS DISTINCT FROM
            (excluded.job_id, excluded.status, excluded.verification, excluded.finished_at);
    RETURN NULL;
END $$;
CREATE TRIGGER release_jobs_progression_insert AFTER INSERT ON release_jobs
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION release_progression_jobs();
CREATE TRIGGER release_jobs_progression_update AFTER UPDATE ON release_jobs
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION release_progression_jobs();

-- A target added counts in its scope and brings its terminal jobs' rows
-- (a target removed and added again counts its old jobs, as a read of
-- its jobs would); a target removed takes its rows away.
CREATE FUNCTION release_progression_targets_in() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO release_progression_scopes AS s (deployment_id, environment_id, targets)
    SELECT a.deployment_id, a.environment_id, count(*) FROM added a GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (deployment_id, environment_id) DO UPDATE SET targets = s.targets + excluded.targets;
    INSERT INTO release_progression_targets (deployment_id, environment_id, version_id, target_key,
        job_created_at, job_id, status, verification, finished_at)
    SELECT * FROM release_progression_newest(ARRAY(SELECT j FROM added a
        JOIN release_jobs j ON j.deployment_id = a.deployment_id AND j.target_key = a.key))
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
CREATE FUNCTION release_progression_targets_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE release_progression_scopes s SET targets = s.targets - g.n
    FROM (SELECT r.deployment_id, r.environment_id, count(*) AS n FROM removed r GROUP BY 1, 2) g
    WHERE s.deployment_id = g.deployment_id AND s.environment_id = g.environment_id;
    DELETE FROM release_progression_targets p WHERE p.target_key IN (SELECT r.key FROM removed r);
    RETURN NULL;
END $$;
CREATE TRIGGER release_targets_progression_insert AFTER INSERT ON release_targets
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION release_progression_targets_in();
CREATE TRIGGER release_targets_progression_delete AFTER DELETE ON release_targets
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION release_progression_targets_out();
