-- The store's epoch: one random value in an unlogged table. PostgreSQL empties an
-- unlogged table whenever it recovers from a crash (and a promoted standby never had
-- its rows), but keeps it across a clean shutdown. So the epoch changes exactly when
-- the server may have lost transactions that committed without waiting for their WAL
-- to be flushed (synchronous_commit = off).
--
-- A worker's claim commits that way (engine/store/leases.py, "Claims and the store's
-- epoch"): the claim names the epoch it was made in, and until a later synchronous
-- commit under the lease has made the claim durable, every write under the lease also
-- requires that epoch (engine/store/statements/leases.py, `held`). A claim the server
-- lost in a crash can then never be written under, even by its own owner claiming the
-- work again with the same token.
CREATE UNLOGGED TABLE store_epoch (
    one   boolean PRIMARY KEY DEFAULT true CHECK (one),
    epoch uuid NOT NULL DEFAULT gen_random_uuid()
);
COMMENT ON TABLE store_epoch IS
    'One random value, lost on every crash recovery: see migration 0029.';

-- Called once by every claim: the store's epoch (the first claim after a crash makes a
-- new one; a concurrent claim that made it first is read after its insert gave way),
-- with the claim's transaction set to commit without waiting for its flush. Only a
-- claim that got an epoch commits that way. PL/pgSQL keeps its plans for the session.
CREATE FUNCTION claim_epoch() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    current uuid;
BEGIN
    SELECT epoch INTO current FROM store_epoch;
    IF current IS NULL THEN
        INSERT INTO store_epoch DEFAULT VALUES ON CONFLICT DO NOTHING RETURNING epoch INTO current;
    END IF;
    IF current IS NULL THEN
        SELECT epoch INTO current FROM store_epoch;
    END IF;
    IF current IS NOT NULL THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    RETURN current::text;
END
$$;
ALTER FUNCTION claim_epoch() SET search_path FROM CURRENT;
