-- Policies live in the catalog: the release chain evaluates the latest
-- published revision of each policy object. Every row of release_policies
-- becomes the next published revision of catalog object policy/<id>
-- (approved by "migration 0010"), so what was in effect stays in effect,
-- and the table goes.
INSERT INTO catalog_objects (kind, name)
SELECT 'policy', id FROM release_policies
ON CONFLICT DO NOTHING;

WITH numbered AS (
    UPDATE catalog_objects o SET highest_number = o.highest_number + 1
    FROM release_policies p
    WHERE o.kind = 'policy' AND o.name = p.id
    RETURNING o.name, o.highest_number
)
INSERT INTO catalog_revisions (kind, name, id, number, lifecycle, content, version,
    approved_by, created_at, updated_at, published_at)
SELECT 'policy', p.id, 'migrated-0010', n.highest_number, 'published', p.doc::text::json, 1,
    'migration 0010', p.updated_at, p.updated_at, p.updated_at
FROM release_policies p JOIN numbered n ON n.name = p.id;

DROP TABLE release_policies;
