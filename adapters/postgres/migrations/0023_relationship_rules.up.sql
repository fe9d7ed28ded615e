-- Relationship rules relate the resources of a workspace, for reference
-- variables (ports.ObjectStore.RelationshipRules). A workspace's delete is
-- refused while it has rules.

CREATE TABLE release_relationship_rules (
    id            text        COLLATE "C" PRIMARY KEY,
    workspace_id  text        COLLATE "C" NOT NULL,
    doc           jsonb       NOT NULL,
    version       bigint      NOT NULL CHECK (version > 0),
    updated_at    timestamptz NOT NULL
);
CREATE INDEX release_relationship_rules_workspace_idx ON release_relationship_rules (workspace_id, id);
