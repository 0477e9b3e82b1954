-- The studio: people (users, teams, memberships with a role), sign-in sessions, API
-- tokens, sign-in failures for rate limiting, and drafts of definitions being edited.
-- Secrets are never stored: sessions and API tokens are kept as the sha256 of the value
-- the client holds, passwords as argon2id hashes. Team ids are the ones definitions.team_id
-- and instances.tenant_id carry.

CREATE TABLE studio_teams (
    team_id    text PRIMARY KEY CHECK (team_id ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    name       text NOT NULL CHECK (name <> ''),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE studio_users (
    user_id              text PRIMARY KEY,
    username             text NOT NULL UNIQUE CHECK (username ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    display_name         text NOT NULL DEFAULT '',
    password_hash        text NOT NULL,
    -- set for a generated one-time password: the first sign-in must choose a new one
    must_change_password boolean NOT NULL DEFAULT false,
    created_at           timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE studio_memberships (
    user_id text NOT NULL REFERENCES studio_users (user_id) ON DELETE CASCADE,
    team_id text NOT NULL REFERENCES studio_teams (team_id) ON DELETE CASCADE,
    role    text NOT NULL CHECK (role IN ('viewer', 'author', 'operator', 'admin')),
    PRIMARY KEY (user_id, team_id)
);
CREATE INDEX studio_memberships_team_idx ON studio_memberships (team_id, user_id);

CREATE TABLE studio_sessions (
    session_hash text PRIMARY KEY,
    user_id      text NOT NULL REFERENCES studio_users (user_id) ON DELETE CASCADE,
    -- the team the person is working in (NULL while they belong to none)
    team_id      text REFERENCES studio_teams (team_id) ON DELETE SET NULL,
    csrf_token   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);
CREATE INDEX studio_sessions_user_idx ON studio_sessions (user_id);

CREATE TABLE studio_api_tokens (
    token_id     text PRIMARY KEY,
    token_hash   text NOT NULL UNIQUE,
    team_id      text NOT NULL REFERENCES studio_teams (team_id) ON DELETE CASCADE,
    role         text NOT NULL CHECK (role IN ('viewer', 'author', 'operator', 'admin')),
    label        text NOT NULL CHECK (label <> ''),
    created_by   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX studio_api_tokens_team_idx ON studio_api_tokens (team_id, created_at);

CREATE TABLE studio_signin_failures (
    username  text NOT NULL,
    client    text NOT NULL,
    failed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX studio_signin_failures_user_idx ON studio_signin_failures (username, failed_at);
CREATE INDEX studio_signin_failures_client_idx ON studio_signin_failures (client, failed_at);

CREATE TABLE studio_drafts (
    draft_id   text PRIMARY KEY,
    team_id    text NOT NULL REFERENCES studio_teams (team_id) ON DELETE CASCADE,
    document   jsonb NOT NULL CHECK (jsonb_typeof(document) = 'object'),
    -- name@version the draft was started from ('' for a new definition)
    based_on   text NOT NULL DEFAULT '',
    -- bumped by every save; an edit made against an older revision is refused
    revision   integer NOT NULL DEFAULT 1 CHECK (revision > 0),
    created_by text NOT NULL,
    updated_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX studio_drafts_team_idx ON studio_drafts (team_id, updated_at DESC);
