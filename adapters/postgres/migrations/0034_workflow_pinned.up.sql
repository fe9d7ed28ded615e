-- A workflow's pinned template and matrix (its expanded fan-out items) are
-- kept apart from its document (ports.WorkflowStore): every scheduling
-- pass reads the document and a phase change rewrites it, while these two
-- may grow with the fan-out (a list source's items are in the template)
-- and never change after creation. Unchanged, a column's TOAST value is
-- shared by every later version of the row. matrix NULL: no matrix.
ALTER TABLE workflows ADD COLUMN template jsonb, ADD COLUMN matrix jsonb;

UPDATE workflows SET template = doc->'template', matrix = doc->'matrix', doc = doc - 'template' - 'matrix';
