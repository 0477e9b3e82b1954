-- Bulk operator actions (issue 21): one operator action confirmed for many instances at
-- once. Each instance gets its own audited operator command (in its history, whose
-- command id starts with the bulk id), and the bulk keeps what was asked and, per
-- instance, what came of it: done, unchanged or refused and why. The bulk id comes
-- from the confirmation form, so a form posted twice finds its bulk and acts once.
CREATE TABLE bulk_commands (
    bulk_id      text PRIMARY KEY,
    tenant_id    text NOT NULL DEFAULT '',
    action       text NOT NULL,
    step_name    text NOT NULL DEFAULT '',
    -- canonical JSON of the action's other arguments (a resolution, a result)
    arguments    text NOT NULL DEFAULT '{}',
    actor        text NOT NULL,
    reason       text NOT NULL,
    instance_ids text[] NOT NULL,
    -- SHA-256 of all of the above: a repeat of the same bulk is told from a conflict
    fingerprint  text NOT NULL CHECK (length(fingerprint) = 64),
    created_at   timestamptz NOT NULL
);
COMMENT ON TABLE bulk_commands IS
    'One bulk operator action: what was asked, by whom, why, of which instances.';

CREATE INDEX bulk_commands_recent_idx ON bulk_commands (tenant_id, created_at DESC, bulk_id);

CREATE TABLE bulk_command_results (
    bulk_id       text NOT NULL,
    instance_id   text NOT NULL,
    outcome       text NOT NULL CHECK (outcome IN ('done', 'unchanged', 'refused')),
    detail        text NOT NULL DEFAULT '',
    -- the instance's audited command ('' when nothing was recorded on it)
    command_id    text NOT NULL DEFAULT '',
    status_before smallint NOT NULL,
    status_after  smallint NOT NULL,
    recorded_at   timestamptz NOT NULL,
    PRIMARY KEY (bulk_id, instance_id)
);
COMMENT ON TABLE bulk_command_results IS
    'What a bulk operator action did to each of its instances; the first result of an instance is kept.';
