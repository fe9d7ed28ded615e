ALTER TABLE catalog_revisions DROP COLUMN created_by, DROP COLUMN edited_by;
