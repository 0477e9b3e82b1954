-- The store's epoch: one random value in an unlogged table. PostgreSQL empties an
-- unlogged table whenever it recovers from a crash (and a promoted standby never had
-- its rows), but keeps it across a clean shutdown. So the epoch changes exactly when
-- the server may have lost transactions that committed without waiting for their WAL
-- to be flushed (synchronous_commit = off).
--
-- A worker's claim commits that way (engine/store/leases.py, "Claims and the store's
-- epoch"): the claim names the epoch it was made in, and until a later synchronous
-- commit under the lease has made the claim durable, every write under the lease also
-- requires that epoch. A claim the server lost in a crash can then never be written
-- under, even by its own owner claiming the work again with the same token.
CREATE UNLOGGED TABLE store_epoch (
    one   boolean PRIMARY KEY DEFAULT true CHECK (one),
    epoch uuid NOT NULL DEFAULT gen_random_uuid()
);
COMMENT ON TABLE store_epoch IS
    'One random value, lost on every crash recovery: see migration 0029.';

-- Called once by every claim: the store's epoch (the first claim after a crash makes a
-- new one), with the claim's transaction set to commit without waiting for its flush.
-- A claim that got no epoch (none can be seen) waits for its flush as before.
CREATE FUNCTION claim_epoch() RETURNS text LANGUAGE sql
BEGIN ATOMIC
    INSERT INTO store_epoch (one) SELECT true WHERE NOT EXISTS (SELECT 1 FROM store_epoch)
        ON CONFLICT DO NOTHING;
    SELECT e.epoch::text FROM store_epoch e
        WHERE set_config('synchronous_commit', 'off', true) IS NOT NULL;
END;

-- Whether a lease claimed in epoch `claimed` may still be written under: always once
-- its claim is durable (the worker then sends NULL), else only in that same epoch.
CREATE FUNCTION in_epoch(claimed uuid) RETURNS boolean LANGUAGE sql STABLE
    RETURN claimed IS NULL OR coalesce(claimed = (SELECT epoch FROM store_epoch), false);
