DROP TABLE IF EXISTS catalog_revisions;
DROP TABLE IF EXISTS catalog_objects;
