-- Who created each catalog revision and who last changed its content.
ALTER TABLE catalog_revisions
    ADD COLUMN created_by text NOT NULL DEFAULT '',
    ADD COLUMN edited_by  text NOT NULL DEFAULT '';
