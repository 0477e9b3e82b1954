-- A person's last view of a list, per team: the Instances page's filters and order as
-- its URL query (studio/accounts/saved_views.py). Opening the list without a query
-- shows that view again, so an operator's search survives a visit to another page.
CREATE TABLE studio_saved_views (
    user_id  text NOT NULL REFERENCES studio_users (user_id) ON DELETE CASCADE,
    team_id  text NOT NULL REFERENCES studio_teams (team_id) ON DELETE CASCADE,
    page     text NOT NULL,
    query    text NOT NULL CHECK (length(query) <= 2000),
    saved_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, team_id, page)
);
