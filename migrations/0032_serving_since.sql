-- When this server began serving the store: the later of its postmaster's start and
-- the making of its epoch (migration 0029). The dead-owner sweep spares, for a while
-- after that, a worker that last took its owner lock before it (engine/store/sweeps.py,
-- RESTART_GRACE), since such a worker is most likely taking its lock again.
--
-- The postmaster's start alone missed a failover: a promoted standby keeps the start
-- time of its postmaster, which may be days old, so the first sweep on it found every
-- worker's owner lock free (their sessions were on the old primary) and expired the
-- leases of the whole fleet, and every attempt in flight across the failover was
-- recorded unknown. The epoch's row is in an unlogged table, which a promoted standby
-- (and a server recovering from a crash) starts empty: the first claim or sweep on it
-- makes a new row, dated then. A clean restart keeps the row, and the postmaster's
-- start is the later one.
ALTER TABLE store_epoch ADD COLUMN made_at timestamptz NOT NULL DEFAULT now();
COMMENT ON COLUMN store_epoch.made_at IS
    'When this epoch was made (server time): see migration 0032.';

-- A new store's epoch is made now, before any worker takes its lock: made by the first
-- claim instead, it would date every worker already running as older than the server.
INSERT INTO store_epoch DEFAULT VALUES ON CONFLICT DO NOTHING;

-- The store's epoch row, made when there is none (a concurrent maker's row is read after
-- its insert gave way). Shared by claims (claim_epoch) and the sweep (serving_since),
-- which set the store's search_path: it has no SET clause of its own, which would cost
-- every claim a configuration change on entry and exit.
CREATE FUNCTION current_store_epoch() RETURNS store_epoch LANGUAGE plpgsql AS $$
DECLARE
    current store_epoch;
BEGIN
    SELECT * INTO current FROM store_epoch;
    IF NOT FOUND THEN
        INSERT INTO store_epoch DEFAULT VALUES ON CONFLICT DO NOTHING RETURNING * INTO current;
    END IF;
    IF current.epoch IS NULL THEN
        SELECT * INTO current FROM store_epoch;
    END IF;
    RETURN current;
END
$$;

CREATE OR REPLACE FUNCTION claim_epoch() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    current uuid := (current_store_epoch()).epoch;
BEGIN
    -- As before (migration 0029): only a claim that got an epoch skips the flush wait.
    PERFORM set_config('synchronous_commit', 'off', true) WHERE current IS NOT NULL;
    RETURN current::text;
END
$$;

CREATE FUNCTION serving_since() RETURNS timestamptz LANGUAGE sql AS $$
    SELECT greatest(pg_postmaster_start_time(), (current_store_epoch()).made_at)
$$;
ALTER FUNCTION serving_since() SET search_path FROM CURRENT;
ALTER FUNCTION claim_epoch() SET search_path FROM CURRENT;
