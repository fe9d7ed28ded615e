-- A workflow's matrix (its expanded fan-out items) is kept apart from its
-- document (ports.WorkflowStore): every scheduling pass reads the document
-- and a phase change rewrites it, while the matrix grows with the fan-out
-- and never changes after creation. Unchanged, the column's TOAST value is
-- shared by every later version of the row. NULL: no matrix.
ALTER TABLE workflows ADD COLUMN matrix jsonb;

UPDATE workflows SET matrix = doc->'matrix', doc = doc - 'matrix' WHERE doc ? 'matrix';
