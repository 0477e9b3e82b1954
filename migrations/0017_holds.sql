-- Incident holds (issue 21): an operator holds a definition name, one version of it, or
-- a whole team. While a hold is in force workers claim none of its instances' work: a
-- claim that finds such work due parks it (work state 5, held) instead of leasing it,
-- and a release makes it due again. Attempts already leased finish and record.
-- Releasing can be gradual: a number of instances at once, or a rate per second that
-- the worker sweeps spend; every placement and release is kept with who and why.
ALTER TABLE work DROP CONSTRAINT work_state_check;
-- 1 available, 2 leased, 3 completed, 4 dead-lettered, 5 held
ALTER TABLE work ADD CONSTRAINT work_state_check CHECK (state BETWEEN 1 AND 5);
CREATE INDEX work_held_idx ON work (instance_id, available_at) WHERE state = 5;

CREATE TABLE holds (
    hold_id        text PRIMARY KEY,
    tenant_id      text NOT NULL DEFAULT '',
    -- '' for a hold on the whole team; a version needs its name
    name           text NOT NULL DEFAULT '',
    version        text NOT NULL DEFAULT '',
    placed_by      text NOT NULL CHECK (placed_by <> ''),
    reason         text NOT NULL CHECK (reason <> ''),
    placed_at      timestamptz NOT NULL,
    -- set when the hold no longer holds anything new: released at once, or drained
    released_at    timestamptz,
    -- a release at a rate: instances per second, and the sweep's unspent allowance
    drain_rate     double precision CHECK (drain_rate > 0),
    drain_budget   double precision NOT NULL DEFAULT 0,
    drain_spent_at timestamptz,
    CHECK (version = '' OR name <> '')
);
COMMENT ON TABLE holds IS
    'Incident holds on a name, a version or a team: who placed each, why, and when it was released.';
CREATE INDEX holds_active_idx ON holds (tenant_id, name, version) WHERE released_at IS NULL;
CREATE INDEX holds_recent_idx ON holds (tenant_id, placed_at DESC, hold_id);

CREATE TABLE hold_releases (
    release_id  text PRIMARY KEY,
    hold_id     text NOT NULL REFERENCES holds (hold_id),
    -- all: the hold ends; count: that many instances resume; rate: per second until empty
    mode        text NOT NULL CHECK (mode IN ('all', 'count', 'rate')),
    amount      double precision NOT NULL DEFAULT 0,
    released_by text NOT NULL CHECK (released_by <> ''),
    reason      text NOT NULL CHECK (reason <> ''),
    released_at timestamptz NOT NULL
);
COMMENT ON TABLE hold_releases IS
    'Every release of a hold, gradual or whole: who, why, when, and how much.';
CREATE INDEX hold_releases_hold_idx ON hold_releases (hold_id, released_at);

CREATE TABLE hold_exemptions (
    hold_id     text NOT NULL REFERENCES holds (hold_id),
    instance_id text NOT NULL,
    release_id  text NOT NULL,
    resumed_at  timestamptz NOT NULL,
    PRIMARY KEY (hold_id, instance_id)
);
COMMENT ON TABLE hold_exemptions IS
    'Instances a gradual release let go: the hold no longer parks their work.';

-- Whether hold h covers instance i and has not let it go (a gradual release exempts
-- it), and whether any active hold does: the one rule, used by the parking trigger
-- below and by the holds' statements (backlogs, releases).
CREATE FUNCTION hold_covers(h holds, i instances) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT h.tenant_id = i.tenant_id
       AND (h.name = '' OR h.name = i.definition_name)
       AND (h.version = '' OR h.version = i.definition_version)
       AND NOT EXISTS (SELECT 1 FROM hold_exemptions x
                       WHERE x.hold_id = h.hold_id AND x.instance_id = i.instance_id)
$$;

CREATE FUNCTION instance_held(instance text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM holds h JOIN instances i ON i.instance_id = instance
                   WHERE h.released_at IS NULL AND hold_covers(h, i))
$$;

-- Work of a held instance is parked as it is written (a start's first step, the next
-- step an in-flight attempt hands on by eager dispatch, a timer) and whenever a row is
-- leased (a claim of work made due again by a retry, a dead lease's work): it stays
-- unleased, and a previous lease (an expired one) stays fenced out. A row trigger says
-- this once for every path; the statements sent at every step are kept
-- within what psycopg parses once (tests/unit/test_statement_sizes.py) and have no room
-- to repeat it. Without any active hold the trigger reads one empty index.
CREATE FUNCTION park_held_work() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM holds WHERE released_at IS NULL)
       AND instance_held(NEW.instance_id) THEN
        NEW.state := 5;
        NEW.lease_owner := '';
        NEW.lease_expires_at := NULL;
        IF TG_OP = 'UPDATE' THEN
            NEW.lease_token := OLD.lease_token;
            NEW.attempts := OLD.attempts;
        ELSE
            NEW.lease_token := 0;
            NEW.attempts := 0;
        END IF;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER work_claim_parks_held BEFORE UPDATE ON work FOR EACH ROW
    WHEN (NEW.state = 2 AND NEW.lease_token > OLD.lease_token)
    EXECUTE FUNCTION park_held_work();
CREATE TRIGGER work_insert_parks_held BEFORE INSERT ON work FOR EACH ROW
    WHEN (NEW.state <= 2)
    EXECUTE FUNCTION park_held_work();
