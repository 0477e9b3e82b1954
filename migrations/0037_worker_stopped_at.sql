-- When a worker stopped cleanly (SIGTERM or SIGINT, after its drain), by the store's
-- clock. A stopped worker's targets counted as running for as long as its last heartbeat
-- was fresh, so right after a rolling deploy stopped the old version's workers nothing
-- said that the instances still pinned to that version had work no worker would take.
-- A stopped worker's targets are nobody's (engine/store/workers.py); a worker that starts
-- again under the same id clears it with its first heartbeat.
ALTER TABLE workers ADD COLUMN stopped_at timestamptz;
COMMENT ON COLUMN workers.stopped_at IS
    'When the worker stopped cleanly (store clock); NULL while it runs or if it died.';
