-- Policies are global again: "workspace_id" leaves every policy revision.
UPDATE catalog_revisions SET content = (content::jsonb - 'workspace_id')::json
WHERE kind = 'policy' AND content::jsonb ? 'workspace_id';
