-- Wayline core tables. The migration runner sets search_path to the target schema, so
-- every name here is unqualified and lands in that schema.

CREATE TABLE instances (
    instance_id            text PRIMARY KEY,
    definition_name        text NOT NULL,
    definition_version     text NOT NULL,
    definition_fingerprint text NOT NULL CHECK (length(definition_fingerprint) = 64),
    -- 1 running, 2 paused, 3 cancelling, 4 completed, 5 failed, 6 cancelled,
    -- 7 terminated, 8 continued_as_new, 9 failing (compensating before it fails)
    status                 smallint NOT NULL CHECK (status BETWEEN 1 AND 9),
    sequence               bigint NOT NULL CHECK (sequence >= 0),
    tenant_id              text NOT NULL DEFAULT '',
    created_at             timestamptz NOT NULL,
    updated_at             timestamptz NOT NULL,
    archived_at            timestamptz
);
COMMENT ON TABLE instances IS
    'One row per instance: its pinned definition and last committed history position, the anchor for compare-and-set commits.';

CREATE INDEX instances_active_idx ON instances (created_at, instance_id)
    WHERE archived_at IS NULL;
CREATE INDEX instances_archived_idx ON instances (created_at, instance_id)
    WHERE archived_at IS NOT NULL;
CREATE INDEX instances_definition_idx
    ON instances (definition_name, definition_version, created_at, instance_id);
CREATE INDEX instances_status_idx ON instances (status, created_at, instance_id);

CREATE TABLE transitions (
    transition_id      text PRIMARY KEY,
    instance_id        text NOT NULL REFERENCES instances (instance_id),
    fingerprint        text NOT NULL CHECK (length(fingerprint) = 64),
    expected_sequence  bigint NOT NULL CHECK (expected_sequence >= 0),
    committed_sequence bigint NOT NULL,
    committed_at       timestamptz NOT NULL DEFAULT now(),
    -- pg_current_xact_id() of the committing transaction, to settle an unknown COMMIT
    xact_id            xid8,
    CHECK (committed_sequence > expected_sequence)
);
COMMENT ON TABLE transitions IS
    'Idempotency ledger: a transition id is committed at most once, with one fingerprint, so replays and conflicting reuse are told apart.';

CREATE INDEX transitions_instance_idx ON transitions (instance_id);

CREATE TABLE history (
    instance_id            text NOT NULL REFERENCES instances (instance_id),
    sequence               bigint NOT NULL CHECK (sequence >= 1),
    kind                   smallint NOT NULL CHECK (kind > 0),
    occurred_at            timestamptz NOT NULL,
    definition_name        text NOT NULL DEFAULT '',
    definition_version     text NOT NULL DEFAULT '',
    definition_fingerprint text NOT NULL DEFAULT '',
    successor_id           text NOT NULL DEFAULT '',
    step_name              text NOT NULL DEFAULT '',
    attempt                bigint NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    idempotency_key        text NOT NULL DEFAULT '',
    due_at                 timestamptz,
    code                   text NOT NULL DEFAULT '',
    retryable              boolean NOT NULL DEFAULT false,
    data                   bytea,
    PRIMARY KEY (instance_id, sequence)
);
COMMENT ON TABLE history IS
    'Append-only event log: at most one event per instance and position.';

CREATE INDEX history_kind_idx ON history (instance_id, kind, sequence);

CREATE TABLE work (
    work_id          text PRIMARY KEY,
    kind             smallint NOT NULL CHECK (kind > 0),
    instance_id      text NOT NULL,
    sequence         bigint NOT NULL,
    available_at     timestamptz NOT NULL,
    deadline         timestamptz NOT NULL,
    payload          bytea,
    tenant_id        text NOT NULL DEFAULT '',
    correlation_id   text NOT NULL DEFAULT '',
    -- the activity or compensation target the work runs, so workers claim only what
    -- they can run ('' for timers and children, which every worker can process)
    target           text NOT NULL DEFAULT '',
    -- 1 available, 2 leased, 3 completed, 4 dead-lettered
    state            smallint NOT NULL DEFAULT 1 CHECK (state BETWEEN 1 AND 4),
    attempts         bigint NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    lease_owner      text NOT NULL DEFAULT '',
    lease_token      bigint NOT NULL DEFAULT 0 CHECK (lease_token >= 0),
    lease_expires_at timestamptz,
    failure_code     text NOT NULL DEFAULT '',
    -- completion time, or the dead-letter time when state = 4
    completed_at     timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (instance_id, sequence) REFERENCES history (instance_id, sequence),
    CHECK (deadline > available_at),
    CHECK (state <> 2 OR (lease_owner <> '' AND lease_expires_at IS NOT NULL))
);
COMMENT ON TABLE work IS
    'Due work and its lease: each row points at the event that created it, and every lease bumps the fencing token.';

CREATE INDEX work_due_idx ON work (available_at, work_id) WHERE state = 1;
CREATE INDEX work_lease_expiry_idx ON work (lease_expires_at, work_id) WHERE state = 2;
CREATE INDEX work_dead_letter_idx ON work (completed_at, work_id) WHERE state = 4;
CREATE INDEX work_lease_owner_idx ON work (lease_owner) WHERE state = 2;
CREATE INDEX work_instance_idx ON work (instance_id, sequence);

CREATE TABLE work_resolutions (
    command_id  text PRIMARY KEY,
    fingerprint text NOT NULL CHECK (length(fingerprint) = 64),
    work_id     text NOT NULL REFERENCES work (work_id),
    lease_token bigint NOT NULL CHECK (lease_token > 0),
    -- 1 retry, 2 discard
    action      smallint NOT NULL CHECK (action IN (1, 2)),
    actor       text NOT NULL CHECK (actor <> ''),
    reason      text NOT NULL CHECK (reason <> ''),
    occurred_at timestamptz NOT NULL,
    retry_at    timestamptz,
    deadline    timestamptz,
    UNIQUE (work_id, lease_token),
    CHECK (
        -- explicit IS NOT NULL: a comparison with NULL would let the CHECK pass
        (action = 1 AND retry_at IS NOT NULL AND deadline IS NOT NULL
            AND retry_at >= occurred_at AND deadline > retry_at)
        OR (action = 2 AND retry_at IS NULL AND deadline IS NULL)
    )
);
COMMENT ON TABLE work_resolutions IS
    'Audited dead-letter commands: at most one resolution per dead letter and fencing token, with actor and reason.';

CREATE TABLE definitions (
    name         text NOT NULL,
    version      text NOT NULL,
    fingerprint  text NOT NULL CHECK (length(fingerprint) = 64),
    spec         jsonb NOT NULL,
    deprecated   boolean NOT NULL DEFAULT false,
    published_at timestamptz NOT NULL DEFAULT now(),
    published_by text NOT NULL DEFAULT '',
    PRIMARY KEY (name, version)
);
COMMENT ON TABLE definitions IS
    'Published definition versions: one row per name and version, its content pinned by the fingerprint.';

CREATE TABLE workers (
    worker_id    text PRIMARY KEY,
    targets      text[] NOT NULL DEFAULT '{}',
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    concurrency  integer NOT NULL DEFAULT 0 CHECK (concurrency >= 0),
    hostname     text NOT NULL DEFAULT '',
    pid          integer NOT NULL DEFAULT 0
);
COMMENT ON TABLE workers IS
    'Registered workers and their last heartbeat: one row per worker id, for operators and recovery sweeps.';
