-- Who revoked an API token. A token's id is the actor (token:<id>) in every audit
-- record it made, so a revoked token stays listed (studio/accounts/api_tokens.py) with
-- when and by whom it was revoked: revoked rows used to vanish from the team's list,
-- leaving a reviewer with audit records naming a token nothing described any more.
-- A token revoked before this migration keeps its time and an empty revoked_by.
ALTER TABLE studio_api_tokens ADD COLUMN revoked_by text NOT NULL DEFAULT '';
ALTER TABLE studio_api_tokens ADD CONSTRAINT studio_api_tokens_revoked_by_check
    CHECK (revoked_by = '' OR revoked_at IS NOT NULL);

-- Who deprecated a definition version, and when (the first deprecation stands; doing it
-- again changes nothing). A version's page and the API said only that it was deprecated,
-- while its publication names who and when. Deprecated before this migration: empty.
ALTER TABLE definitions ADD COLUMN deprecated_by text NOT NULL DEFAULT '';
ALTER TABLE definitions ADD COLUMN deprecated_at timestamptz;
