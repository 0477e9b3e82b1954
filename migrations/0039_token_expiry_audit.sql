-- The members audit showed an API token made or revoked (0038) and an invitation that
-- lapsed, but not a token that expired: a token stopped acting for the team and the
-- audit never said so. An expiry, like a lapse, happens in no transaction of ours, so
-- the first read of the team's audit after it records it, dated when the token expired,
-- with the actor 'time limit', by the token's id and label (never its secret). A token
-- revoked before it expired stopped by its revocation, which is its own entry.
ALTER TABLE studio_account_audit DROP CONSTRAINT studio_account_audit_action_check;
ALTER TABLE studio_account_audit ADD CONSTRAINT studio_account_audit_action_check
    CHECK (action IN (
        'invited', 'invitation_withdrawn', 'invitation_expired', 'joined', 'added',
        'role_changed', 'removed', 'token_created', 'token_revoked', 'token_expired'));
COMMENT ON COLUMN studio_account_audit.token_id IS
    'The API token a token_created, token_revoked or token_expired entry concerns (wl_<id>_...), else empty.';

-- A lapsed invitation is deleted when its lapse is recorded, which is what records it
-- once; an expired token stays listed (its id is the actor of what it did), so it is
-- marked instead. Tokens that expired before this migration are recorded by the first
-- read after it, each dated when it expired.
ALTER TABLE studio_api_tokens ADD COLUMN expiry_audited boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN studio_api_tokens.expiry_audited IS
    'Whether the members audit records this token''s expiry (studio/accounts/api_tokens.py).';
