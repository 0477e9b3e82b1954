-- API tokens get an optional expiry and remember the user who created them: a token
-- works only until it expires and while that user is an admin of the token's team
-- (checked on every use, studio/api_tokens.py). A token made with another token has
-- that token's creator. Existing tokens name their creator by username (or token:<id>,
-- followed here); a token whose creator cannot be found has none and no longer works.
ALTER TABLE studio_api_tokens
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN creator_id text NOT NULL DEFAULT '';

WITH RECURSIVE creators AS (
    SELECT t.token_id, u.user_id
    FROM studio_api_tokens t JOIN studio_users u ON u.username = t.created_by
    UNION
    SELECT t.token_id, c.user_id
    FROM studio_api_tokens t JOIN creators c ON t.created_by = 'token:' || c.token_id
)
UPDATE studio_api_tokens t SET creator_id = c.user_id
FROM creators c WHERE c.token_id = t.token_id;

-- An admin adds a person to a team by inviting a username: the invitation's one-time
-- code (kept as its sha256) is redeemed at /join by signing in to the existing account
-- or by creating it. Whether the username exists is thus never part of the admin's
-- answer. A redeemed invitation is deleted.
CREATE TABLE studio_invitations (
    invitation_id text PRIMARY KEY,
    code_hash     text NOT NULL UNIQUE,
    team_id       text NOT NULL REFERENCES studio_teams (team_id) ON DELETE CASCADE,
    username      text NOT NULL CHECK (username ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    display_name  text NOT NULL DEFAULT '',
    role          text NOT NULL CHECK (role IN ('viewer', 'author', 'operator', 'admin')),
    created_by    text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL
);
CREATE INDEX studio_invitations_team_idx ON studio_invitations (team_id, created_at);
