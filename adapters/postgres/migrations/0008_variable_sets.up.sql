-- Variable sets become objects of their own, stored under their system
-- (ports.ObjectStore.VariableSets). The sets a system document held are
-- moved out: each becomes a row with id "<system>-vs-NNNN" (its position
-- in the old list, so id order keeps the old list order among equal
-- priorities), and the system document loses its variable_sets field.

CREATE TABLE release_variable_sets (
    id          text        COLLATE "C" PRIMARY KEY,
    system_id   text        COLLATE "C" NOT NULL,
    doc         jsonb       NOT NULL,
    version     bigint      NOT NULL CHECK (version > 0),
    updated_at  timestamptz NOT NULL
);
CREATE INDEX release_variable_sets_system_idx ON release_variable_sets (system_id, id);

INSERT INTO release_variable_sets (id, system_id, doc, version, updated_at)
SELECT s.id || '-vs-' || lpad(vs.n::text, 4, '0'), s.id,
       vs.doc || jsonb_build_object('id', s.id || '-vs-' || lpad(vs.n::text, 4, '0'), 'system_id', s.id),
       1, s.updated_at
FROM release_systems s,
     jsonb_array_elements(CASE WHEN jsonb_typeof(s.doc->'variable_sets') = 'array' THEN s.doc->'variable_sets' ELSE '[]'::jsonb END)
       WITH ORDINALITY AS vs(doc, n);

UPDATE release_systems SET doc = doc - 'variable_sets' WHERE doc ? 'variable_sets';
