"""Sign-in limits as a guesser and an owner meet them: concurrent bursts, many addresses."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from argon2 import PasswordHasher

from engine.cli.main import main
from engine.store.store import Store
from studio.accounts import people
from studio.accounts.signin_limits import SignInLimits, client_address, trusted_networks
from studio.roles import Role
from tests.integration.conftest import pg_dsn  # noqa: F401
from tests.studio.live import PASSWORD, LiveStudio, login_token, serve_studio

LIMITS = SignInLimits(per_pair=5, per_client=30, per_user=10)
BURST = 60
SLOW = PasswordHasher(time_cost=10, memory_cost=65536, parallelism=1)
"""A stored hash this costly takes about half a second to check: long enough that the
checks of a burst are plainly still running when an unrelated request is answered."""
REWIND = "UPDATE studio_signin_failures SET failed_at = failed_at - %s WHERE username = %s"


@pytest.fixture(scope="module")
def guarded(pg_dsn: str) -> Iterator[LiveStudio]:  # noqa: F811
    """A studio with the real limits behind a trusted proxy (so tests can pick addresses)."""
    with serve_studio(pg_dsn, signin_limits=LIMITS, trusted_proxies=("127.0.0.1",)) as live:
        yield live


@pytest.fixture(scope="module")
def exposed(pg_dsn: str) -> Iterator[LiveStudio]:  # noqa: F811
    """A studio with no trusted proxy and a small per-address limit."""
    limits = SignInLimits(per_pair=100, per_client=3, per_user=100)
    with serve_studio(pg_dsn, signin_limits=limits) as live:
        yield live


def address() -> str:
    return f"2001:db8::{uuid.uuid4().hex[:4]}"


def test_a_concurrent_burst_is_checked_at_most_the_limit_and_other_pages_stay_served(
    guarded: LiveStudio,
) -> None:
    team = guarded.team()
    target = guarded.user(team, Role.ADMIN)
    slow_hash = SLOW.hash(PASSWORD)
    guarded.run(lambda store: _store_hash(store, target, slow_hash))
    watcher = guarded.client(guarded.user(team, Role.VIEWER))

    statuses, me_status, checks_running = asyncio.run(
        _burst(guarded.url, target, dict(watcher.cookies))
    )
    assert statuses.count(401) == LIMITS.per_pair
    assert statuses.count(429) == BURST - LIMITS.per_pair
    assert me_status == 200
    assert checks_running > 0, "the unrelated request waited for the burst's password checks"


async def _store_hash(store: Store, username: str, password_hash: str) -> None:
    found = await people.find_login(store, username)
    assert found is not None
    await people.store_rehash(store, found[0].user_id, password_hash, False)


async def _burst(url: str, username: str, cookies: dict[str, str]) -> tuple[list[int], int, int]:
    """Send BURST wrong passwords at once from one address; once the first is refused
    (the admitted ones are being checked then), ask for /api/me on another session.
    Returns every sign-in status, /api/me's status and how many checks were still
    running when /api/me was answered."""
    async with (
        httpx.AsyncClient(base_url=url, timeout=120) as guesser,
        httpx.AsyncClient(base_url=url, timeout=120, cookies=cookies) as watcher,
    ):
        form = {
            "_login": login_token(await guesser.get("/login")),
            "username": username,
            "password": "not the password at all",
        }
        headers = {"X-Forwarded-For": address()}
        attempts = [
            asyncio.create_task(guesser.post("/login", data=form, headers=headers))
            for _ in range(BURST)
        ]
        pending: set[asyncio.Task[httpx.Response]] = set(attempts)
        refused = False
        while pending and not refused:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            refused = any(task.result().status_code == 429 for task in done)
        me = await watcher.get("/api/me")
        running = sum(not task.done() for task in attempts)
        statuses = [(await task).status_code for task in attempts]
    return statuses, me.status_code, running


def test_failures_from_one_address_do_not_lock_the_owner_out_from_another(
    guarded: LiveStudio,
) -> None:
    team = guarded.team()
    username = guarded.user(team, Role.ADMIN)
    guesser = guarded.client()
    guesser.headers["X-Forwarded-For"] = address()
    for _ in range(LIMITS.per_pair):
        assert guesser.sign_in(username, "guess guess guess").status_code == 401
    assert guesser.sign_in(username).status_code == 429  # that address is done guessing
    owner = guarded.client()
    owner.headers["X-Forwarded-For"] = address()
    assert owner.sign_in(username).status_code == 303


def test_guesses_from_many_addresses_slow_a_username_down_without_locking_it(
    guarded: LiveStudio,
) -> None:
    team = guarded.team()
    username = guarded.user(team, Role.ADMIN)
    for _ in range(LIMITS.per_user):
        guesser = guarded.client()
        guesser.headers["X-Forwarded-For"] = address()
        assert guesser.sign_in(username, "guess guess guess").status_code == 401
    owner = guarded.client()
    owner.headers["X-Forwarded-For"] = address()
    slowed = owner.sign_in(username)
    assert slowed.status_code == 429
    retry_after = int(slowed.headers["retry-after"])
    assert 1 <= retry_after <= LIMITS.max_user_delay.total_seconds()
    assert f"try again in {retry_after} s" in slowed.text
    waited = timedelta(seconds=retry_after)  # as if the owner had waited as told
    guarded.run(lambda store: _rewind(store, username, waited))
    assert owner.sign_in(username).status_code == 303


async def _rewind(store: Store, username: str, by: timedelta) -> None:
    async with store.connection() as conn:
        await conn.execute(REWIND, (by, username))


def test_x_forwarded_for_is_ignored_without_a_trusted_proxy(exposed: LiveStudio) -> None:
    client = exposed.client()
    for _ in range(3):
        client.headers["X-Forwarded-For"] = address()
        assert client.sign_in(f"nobody-{uuid.uuid4().hex[:6]}", PASSWORD).status_code == 401
    client.headers["X-Forwarded-For"] = address()
    refused = client.sign_in(f"nobody-{uuid.uuid4().hex[:6]}", PASSWORD)
    assert refused.status_code == 429


def test_the_client_is_the_nearest_forwarded_address_that_is_not_a_trusted_proxy() -> None:
    proxies = trusted_networks(["10.0.0.0/8", "127.0.0.1"])
    spoofed_then_real = "1.2.3.4, 203.0.113.9, 10.1.2.3"
    assert client_address("127.0.0.1", spoofed_then_real, proxies) == "203.0.113.9"
    assert client_address("198.51.100.7", spoofed_then_real, proxies) == "198.51.100.7"
    assert client_address("10.9.9.9", "", proxies) == "10.9.9.9"
    assert client_address("127.0.0.1", "10.0.0.1, 10.0.0.2", proxies) == "10.0.0.1"


def test_wayline_studio_refuses_a_trusted_proxy_that_is_no_address(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["studio", "--trusted-proxy", "proxy.example"]) == 2
    assert "a trusted proxy is an IP address or network" in capsys.readouterr().err
