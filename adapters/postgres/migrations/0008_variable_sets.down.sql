-- Puts each system's variable sets back into its document (id order),
-- without their id and system_id, and drops the table.
UPDATE release_systems s SET doc = s.doc || jsonb_build_object('variable_sets',
    (SELECT jsonb_agg(v.doc - 'id' - 'system_id' ORDER BY v.id) FROM release_variable_sets v WHERE v.system_id = s.id))
WHERE EXISTS (SELECT 1 FROM release_variable_sets v WHERE v.system_id = s.id);
DROP TABLE IF EXISTS release_variable_sets;
