-- Migration of running instances from the studio (issue 21): an operator declares an
-- edge from one version of a name to another (who, why, when); the catalog loads the
-- declared edges into every registry, so an instance may be migrated along one (paused,
-- migrated, resumed: each an audited command) and every worker replays the migration.
-- A declared edge has no code: it keeps the instance's input and progress as they are.
CREATE TABLE migration_edges (
    name         text NOT NULL,
    from_version text NOT NULL,
    to_version   text NOT NULL,
    declared_by  text NOT NULL,
    reason       text NOT NULL,
    declared_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, from_version, to_version),
    CHECK (from_version <> to_version)
);
COMMENT ON TABLE migration_edges IS
    'Declared migration edges between two published versions of a name, with who declared each and why.';
