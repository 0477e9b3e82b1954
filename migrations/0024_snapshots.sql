-- Snapshots of replayed state (issue 23): opening a long instance reads its newest
-- snapshot plus the events after it, instead of its whole history. At most one row per
-- instance (its newest), written by the transition that crosses a multiple of
-- engine.replay.snapshots.SNAPSHOT_INTERVAL_EVENTS, in that transition's own
-- PostgreSQL transaction (engine/store/commits.py). A row is only a cache of what
-- history already says: a reader ignores one whose fold_version is not this build's,
-- whose state text does not have its digest (SHA-256), that does not decode, or whose
-- pinned definition the registry does not resolve, and replays the whole history
-- instead. Retention removes it with its instance.
CREATE TABLE snapshots (
    instance_id  text NOT NULL,
    sequence     bigint NOT NULL CHECK (sequence >= 1),
    fold_version integer NOT NULL CHECK (fold_version >= 1),
    digest       text NOT NULL CHECK (length(digest) = 64),
    state        text NOT NULL,
    written_at   timestamptz NOT NULL,
    PRIMARY KEY (instance_id)
);
COMMENT ON TABLE snapshots IS
    'Per instance: its replayed state at sequence as canonical JSON, and that text''s SHA-256.';
