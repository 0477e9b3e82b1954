-- Shard-ready keys (issue 25, docs/scaling.md "Sharding by instance"): every table of
-- per-instance rows is keyed by instance id first, so that instance id can be the
-- distribution key (a distributed table needs it in every unique constraint) and every
-- lookup by key names the one instance, and with it the one shard, it is about.
-- Transition ids and work ids are derived from their instance's id, so keying them
-- within their instance changes no set of ids that can exist together.
--
-- Already keyed this way: instances (instance_id), history (instance_id, sequence),
-- snapshots (instance_id). Two tables with an instance_id column stay keyed by what
-- they belong to: bulk_command_results (bulk_id, instance_id) is one bulk command's
-- outcome per instance, written and read as that command's report, and
-- hold_exemptions (hold_id, instance_id) is one hold's list of released instances,
-- read as that hold's; both belong with their command or hold, which are catalog rows
-- (tests/integration/test_migrations.py names them in its allow-list).

-- The ledger: (instance_id, transition_id). The constraint keeps its name: a commit
-- that loses the race for a transition id is recognised by it
-- (engine/store/commits.py LEDGER_KEY). The new key's prefix serves every read by
-- instance (retention, checks), so the separate instance index goes.
ALTER TABLE transitions DROP CONSTRAINT transitions_pkey;
ALTER TABLE transitions ADD CONSTRAINT transitions_pkey PRIMARY KEY (instance_id, transition_id);
DROP INDEX transitions_instance_idx;

-- Resolutions carry their work's instance, backfilled while work is still keyed by
-- work_id (the join is then a key probe per resolution).
ALTER TABLE work_resolutions ADD COLUMN instance_id text;
UPDATE work_resolutions r SET instance_id = w.instance_id FROM work w WHERE w.work_id = r.work_id;
ALTER TABLE work_resolutions ALTER COLUMN instance_id SET NOT NULL;

-- Work: (instance_id, work_id). The resolutions' foreign key names the old key, so it
-- goes first and comes back on the new one.
ALTER TABLE work_resolutions DROP CONSTRAINT work_resolutions_work_id_fkey;
ALTER TABLE work DROP CONSTRAINT work_pkey;
ALTER TABLE work ADD CONSTRAINT work_pkey PRIMARY KEY (instance_id, work_id);

-- Resolutions: a command id is unique within its instance, a fence (work, token) is
-- resolved once, and the fence's work row exists. The unique fence key also serves the
-- foreign key's checks when work rows are deleted.
ALTER TABLE work_resolutions DROP CONSTRAINT work_resolutions_pkey;
ALTER TABLE work_resolutions
    ADD CONSTRAINT work_resolutions_pkey PRIMARY KEY (instance_id, command_id);
ALTER TABLE work_resolutions DROP CONSTRAINT work_resolutions_work_id_lease_token_key;
ALTER TABLE work_resolutions
    ADD CONSTRAINT work_resolutions_fence_key UNIQUE (instance_id, work_id, lease_token);
ALTER TABLE work_resolutions
    ADD CONSTRAINT work_resolutions_work_fkey FOREIGN KEY (instance_id, work_id)
    REFERENCES work (instance_id, work_id);
