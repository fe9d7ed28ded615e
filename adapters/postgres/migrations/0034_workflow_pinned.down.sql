UPDATE workflows SET doc = doc || jsonb_build_object('template', template)
    || CASE WHEN matrix IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('matrix', matrix) END;

ALTER TABLE workflows DROP COLUMN IF EXISTS template, DROP COLUMN IF EXISTS matrix;
