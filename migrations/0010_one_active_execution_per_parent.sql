-- State machines (issue 19): at most one active execution of a machine per parent, kept
-- by PostgreSQL rather than by a read-then-write. A start records the parent its data
-- names ('' for every instance that has none: step lists, and anything started before);
-- the index admits one row per (machine, parent) among instances not yet archived, and
-- the terminal transition archives an instance (archived_at), which frees its parent.
ALTER TABLE instances ADD COLUMN parent_key text NOT NULL DEFAULT '';

CREATE UNIQUE INDEX instances_one_active_per_parent ON instances (definition_name, parent_key)
    WHERE parent_key <> '' AND archived_at IS NULL;
