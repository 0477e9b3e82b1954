-- Who may still act, for the re-check a state machine's worker makes before every advance
-- (issue 19): each principal the studio knows, by the actor its audit fields record (a
-- username, or token:<id> for an API token), with its team and role there. A person is
-- one row per membership; a token stands while it is neither revoked nor expired and its
-- creator is still an admin of its team (as studio/accounts/api_tokens.py checks on use).
-- Removing someone from a team removes the row: their executions there lose standing.
CREATE VIEW principal_standing AS
SELECT u.username AS actor, m.team_id AS team, m.role AS role
FROM studio_users u
JOIN studio_memberships m ON m.user_id = u.user_id
UNION ALL
SELECT 'token:' || t.token_id, t.team_id, t.role
FROM studio_api_tokens t
JOIN studio_memberships c
  ON c.user_id = t.creator_id AND c.team_id = t.team_id AND c.role = 'admin'
WHERE t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now());
