-- The revisioned catalog: workflow templates and policies.
--
-- catalog_objects holds one row per object ever created, with the highest
-- revision number it ever published, so numbers are never reused after a
-- deletion; publishing increments it under the row's lock.
CREATE TABLE catalog_objects (
    kind            text    COLLATE "C" NOT NULL,
    name            text    COLLATE "C" NOT NULL,
    highest_number  integer NOT NULL DEFAULT 0 CHECK (highest_number >= 0),
    PRIMARY KEY (kind, name)
);

-- One row per revision. content is json (not jsonb) so it is kept byte for
-- byte: a published revision reads back exactly as it was approved.
CREATE TABLE catalog_revisions (
    kind          text        COLLATE "C" NOT NULL,
    name          text        COLLATE "C" NOT NULL,
    id            text        COLLATE "C" NOT NULL,
    number        integer     NOT NULL DEFAULT 0 CHECK (number >= 0),
    lifecycle     text        NOT NULL
                  CHECK (lifecycle IN ('draft', 'proposed', 'published', 'deletion-proposed')),
    content       json        NOT NULL CHECK (json_typeof(content) = 'object'),
    labels        jsonb       NOT NULL DEFAULT '{}',
    annotations   jsonb       NOT NULL DEFAULT '{}',
    version       bigint      NOT NULL CHECK (version > 0),
    approved_by   text        NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    published_at  timestamptz,
    PRIMARY KEY (kind, name, id),
    FOREIGN KEY (kind, name) REFERENCES catalog_objects (kind, name),
    -- Open drafts have no number; published revisions have one.
    CHECK ((number = 0) = (lifecycle IN ('draft', 'proposed')))
);

-- A number names one revision of an object.
CREATE UNIQUE INDEX catalog_revisions_number_idx
    ON catalog_revisions (kind, name, number) WHERE number > 0;

-- At most one open draft per object.
CREATE UNIQUE INDEX catalog_revisions_open_draft_idx
    ON catalog_revisions (kind, name) WHERE lifecycle IN ('draft', 'proposed');

-- Listing by lifecycle across objects.
CREATE INDEX catalog_revisions_lifecycle_idx ON catalog_revisions (lifecycle, kind, name);
