-- Drops the relationship rules (reference variables then stay unresolved).
DROP TABLE IF EXISTS release_relationship_rules;
