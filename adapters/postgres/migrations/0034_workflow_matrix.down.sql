UPDATE workflows SET doc = doc || jsonb_build_object('matrix', matrix) WHERE matrix IS NOT NULL;

ALTER TABLE workflows DROP COLUMN IF EXISTS matrix;
