"""``principal_standing``: whether a submitter still stands, read from the studio's
account tables through the view of migration 0011."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest

from engine.store.principals import Standing, principal_standing
from engine.store.store import Store

T0 = datetime(2026, 3, 1, tzinfo=UTC)
ACCOUNTS = """
INSERT INTO studio_teams (team_id, name) VALUES ('red', 'Red');
INSERT INTO studio_users (user_id, username, password_hash)
    VALUES ('u1', 'ada', 'x'), ('u2', 'bob', 'x');
INSERT INTO studio_memberships (user_id, team_id, role)
    VALUES ('u1', 'red', 'admin'), ('u2', 'red', 'author');
INSERT INTO studio_api_tokens (token_id, token_hash, team_id, role, label, created_by,
                               creator_id, expires_at, revoked_at)
    VALUES ('t1', 'h1', 'red', 'operator', 'ci', 'ada', 'u1', NULL, NULL),
           ('t2', 'h2', 'red', 'operator', 'old', 'ada', 'u1', now() - interval '1 day', NULL),
           ('t3', 'h3', 'red', 'operator', 'off', 'ada', 'u1', NULL, now()),
           ('t4', 'h4', 'red', 'operator', 'bobs', 'bob', 'u2', NULL, NULL);
"""


@pytest.fixture
async def accounts(store: Store, aconn: psycopg.AsyncConnection) -> Store:
    await aconn.execute(ACCOUNTS)
    await aconn.commit()
    return store


@pytest.mark.parametrize(
    ("actor", "team", "scope", "standing"),
    [
        ("ada", "red", "operator", Standing.STANDS),  # admin covers every scope
        ("bob", "red", "author", Standing.STANDS),
        ("bob", "red", "operator", Standing.NARROWED),  # an author is not an operator
        ("ada", "blue", "viewer", Standing.GONE),  # not in that team
        ("carol", "red", "viewer", Standing.GONE),
        ("token:t1", "red", "operator", Standing.STANDS),
        ("token:t2", "red", "operator", Standing.GONE),  # expired
        ("token:t3", "red", "operator", Standing.GONE),  # revoked
        ("token:t4", "red", "operator", Standing.GONE),  # its creator is no admin
        ("anyone", "", "admin", Standing.STANDS),  # the engine's own team
    ],
)
async def test_standing_follows_the_accounts(
    accounts: Store, actor: str, team: str, scope: str, standing: Standing
) -> None:
    assert await principal_standing(accounts, actor, team, scope) is standing


async def test_leaving_the_team_loses_standing(
    accounts: Store, aconn: psycopg.AsyncConnection
) -> None:
    await aconn.execute("DELETE FROM studio_memberships WHERE user_id = 'u1'")
    await aconn.commit()
    assert await principal_standing(accounts, "ada", "red", "viewer") is Standing.GONE
    assert await principal_standing(accounts, "token:t1", "red", "viewer") is Standing.GONE
