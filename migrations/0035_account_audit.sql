-- The audit of account actions (studio/accounts/account_audit.py): who invited whom to a
-- team, withdrew an invitation, changed a member's role or removed a member, and when
-- a person joined with an invitation or was added from the command line. Changing a
-- role, removing a member or inviting someone used to leave no record of who did it or
-- when, so a reviewer could see a team's members but not how they came to be. Each row
-- is written in the transaction that makes the change it records, never afterwards.
-- The actor is named as every audit field names one: a username, token:<id> for an API
-- token, or a phrase with a space (command line, first start), which no username holds.
-- No foreign keys: a record outlives the membership, invitation or account it names.
CREATE TABLE studio_account_audit (
    entry_id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    team_id     text NOT NULL,
    occurred_at timestamptz NOT NULL DEFAULT now(),
    actor       text NOT NULL CHECK (actor <> ''),
    action      text NOT NULL CHECK (action IN (
                    'invited', 'invitation_withdrawn', 'joined', 'added', 'role_changed',
                    'removed')),
    -- the member (or invited username) the action concerns
    username    text NOT NULL CHECK (username <> ''),
    -- the role before and after ('' where there is none: an invitation has no before,
    -- a removal no after)
    from_role   text NOT NULL DEFAULT ''
                CHECK (from_role IN ('', 'viewer', 'author', 'operator', 'admin')),
    to_role     text NOT NULL DEFAULT ''
                CHECK (to_role IN ('', 'viewer', 'author', 'operator', 'admin'))
);
COMMENT ON TABLE studio_account_audit IS
    'Who did what to a team''s members and invitations, and when: one row per change, written with it.';

-- a team's audit, newest first, a keyset page at a time
CREATE INDEX studio_account_audit_team_idx ON studio_account_audit (team_id, entry_id);
