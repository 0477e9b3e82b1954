-- When each worker last took its owner lock, by the server's own clock. A database
-- restart ends every session, so every worker's lock is free until its worker takes it
-- again, and the dead-owner sweep used to expire the leases of the whole fleet at once:
-- an attempt in flight across a restart of a few seconds was recorded unknown. The
-- sweep now spares, for a while after the server started, an owner that last took its
-- lock before the server started (engine/store/sweeps.py, RESTART_GRACE); an owner
-- that took its lock on the running server and lost it is dead, at once, as before.
ALTER TABLE workers ADD COLUMN locked_at timestamptz;
COMMENT ON COLUMN workers.locked_at IS
    'When the worker last took its owner lock (server time); NULL before it has.';
