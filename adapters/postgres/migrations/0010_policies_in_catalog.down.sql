-- Back to the release_policies table, holding the latest published revision
-- of every policy; the catalog keeps its revisions.
CREATE TABLE release_policies (
    id          text        COLLATE "C" PRIMARY KEY,
    priority    integer     NOT NULL,
    enabled     boolean     NOT NULL,
    doc         jsonb       NOT NULL,
    version     bigint      NOT NULL CHECK (version > 0),
    updated_at  timestamptz NOT NULL
);
CREATE INDEX release_policies_list_idx ON release_policies (enabled, priority DESC, id);

INSERT INTO release_policies (id, priority, enabled, doc, version, updated_at)
SELECT DISTINCT ON (name) name, coalesce((content->>'priority')::integer, 0),
    coalesce((content->>'enabled')::boolean, false), content::jsonb, number, published_at
FROM catalog_revisions
WHERE kind = 'policy' AND lifecycle = 'published'
ORDER BY name, number DESC;
