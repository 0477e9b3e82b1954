-- The members audit (0035) said nothing of API tokens, which act for the team with a
-- role of their own, nor of an invitation that lapsed unused: a reviewer saw tokens in
-- Settings but not who made or revoked one, nor how a pending invitation went away.
-- Now an admin making or revoking a token (each token a revocation takes with it too)
-- and an invitation lapsing are entries. A token is named by its id and label, never by
-- its secret; the entry's username is the member the token stands for (its creator).
-- A lapsed invitation is recorded by the first read of the team's people after it
-- lapsed (it is deleted then), dated when it lapsed, with the actor 'time limit'.
ALTER TABLE studio_account_audit DROP CONSTRAINT studio_account_audit_action_check;
ALTER TABLE studio_account_audit ADD CONSTRAINT studio_account_audit_action_check
    CHECK (action IN (
        'invited', 'invitation_withdrawn', 'invitation_expired', 'joined', 'added',
        'role_changed', 'removed', 'token_created', 'token_revoked'));
ALTER TABLE studio_account_audit
    ADD COLUMN token_id    text NOT NULL DEFAULT '',
    ADD COLUMN token_label text NOT NULL DEFAULT '';
COMMENT ON COLUMN studio_account_audit.token_id IS
    'The API token a token_created or token_revoked entry concerns (wl_<id>_...), else empty.';
COMMENT ON COLUMN studio_account_audit.token_label IS
    'That token''s label when the entry was written, else empty.';

-- One name for the command line wherever it acts: the engine records it as 'cli' (an
-- instance's started_by, every audited command), whose actors are ids, so the members
-- audit's 'command line' becomes 'cli' too, old entries with it (the same actor).
UPDATE studio_account_audit SET actor = 'cli' WHERE actor = 'command line';
