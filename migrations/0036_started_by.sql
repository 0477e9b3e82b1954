-- Who started an instance (studio/API/CLI): the actor of the start, kept on its
-- instance_started event. The studio user (a username), the API token (token:<id>,
-- which Settings still describes once revoked) or the command line (its --actor,
-- 'cli' by default) that started an instance was kept nowhere, so a reviewer could see
-- every operator command on an instance but not who set it going. Like trace_context
-- (migration 0019) it is an observation of the start, not a fact of the run: replay
-- and the transition's fingerprint leave it out, so a start retried by another caller
-- joins the same instance, and histories written before this migration replay as
-- before. NULL for every other event, for a child (its parent started it) and for
-- starts written before this migration.
ALTER TABLE history ADD COLUMN started_by text
    CHECK (started_by IS NULL OR length(started_by) BETWEEN 1 AND 200);
COMMENT ON COLUMN history.started_by IS
    'Who started the instance (instance_started only): a username, token:<id> or a command line actor; not part of replay or fingerprints.';
