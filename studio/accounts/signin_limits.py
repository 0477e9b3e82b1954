"""Rate limiting of sign-in attempts: per (username, address), per address, per username.

The policy (a guesser is stopped, the owner is slowed down but never locked out):

- **(username, address)**: after ``per_pair`` failures inside the window, that address
  may not try that username again until the oldest of them leaves the window. This is
  the limit a guesser at one address meets; the owner elsewhere does not.
- **address**: after ``per_client`` failures (any usernames) inside the window, the
  address may not try at all until the oldest leaves the window.
- **username, from every address**: no lock. Once the username has ``per_user``
  failures inside the window, its attempts are spaced out: each must come
  ``user_delay * 2**(failures - per_user)`` (at most ``max_user_delay``) after the
  previous one. Guessers spread over many addresses get one guess per delay; the owner
  at another address waits at most ``max_user_delay``, never the whole window.

The address is the connection's peer, or, when the peer is one of the trusted proxies
(``client_address``), the nearest address in ``X-Forwarded-For`` that is not one.

An attempt is *reserved* before its password is checked (``reserve``): one transaction
takes advisory locks on the username and the address (always in the same order, so two
attempts never deadlock) and then one statement counts the failures and, when every
limit allows it, records this attempt as a failure. Concurrent attempts therefore see
each other, and at most the limit are ever checked. A successful sign-in deletes its
(username, address) failures, its own reservation among them (``succeeded``). Failures
live in PostgreSQL, so the limits hold across restarts and several studio processes;
refusing before hashing also keeps a guessing client from burning CPU.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from engine import Store

MAX_KEY = 100
"""Usernames and forwarded addresses are counted by at most this many characters."""
LOCK = """
SELECT pg_advisory_xact_lock(least(u, c)), pg_advisory_xact_lock(greatest(u, c))
FROM (SELECT hashtextextended('wayline signin user ' || %(username)s, 0) AS u,
             hashtextextended('wayline signin client ' || %(client)s, 0) AS c) AS keys
"""
PURGE = "DELETE FROM studio_signin_failures WHERE failed_at <= clock_timestamp() - %(window)s"
RESERVE = """
WITH recent AS (
    SELECT username = %(username)s AS by_user, client = %(client)s AS by_client, failed_at
    FROM studio_signin_failures
    WHERE (username = %(username)s OR client = %(client)s)
      AND failed_at > clock_timestamp() - %(window)s
), counts AS (
    SELECT count(*) FILTER (WHERE by_user AND by_client) AS pair,
           min(failed_at) FILTER (WHERE by_user AND by_client) AS pair_oldest,
           count(*) FILTER (WHERE by_client) AS client,
           min(failed_at) FILTER (WHERE by_client) AS client_oldest,
           count(*) FILTER (WHERE by_user) AS username,
           max(failed_at) FILTER (WHERE by_user) AS user_latest
    FROM recent
), wait AS (
    SELECT greatest(
        CASE WHEN pair >= %(per_pair)s THEN pair_oldest + %(window)s END,
        CASE WHEN client >= %(per_client)s THEN client_oldest + %(window)s END,
        CASE WHEN username >= %(per_user)s THEN user_latest + least(
            %(user_delay)s * power(2, least(username - %(per_user)s, 30)), %(max_user_delay)s
        ) END
    ) - clock_timestamp() AS wait
    FROM counts
), reserved AS (
    INSERT INTO studio_signin_failures (username, client, failed_at)
    SELECT %(username)s, %(client)s, clock_timestamp() FROM wait
    WHERE wait IS NULL OR wait <= interval '0'
)
SELECT extract(epoch FROM wait) FROM wait
"""
SUCCEEDED = "DELETE FROM studio_signin_failures WHERE username = %s AND client = %s"


@dataclass(frozen=True)
class SignInLimits:
    per_pair: int = 5
    """Failures of one username from one address inside the window."""
    per_client: int = 30
    """Failures from one address, any usernames, inside the window."""
    per_user: int = 10
    """Failures of one username, any addresses, before its attempts are spaced out."""
    window: timedelta = timedelta(minutes=15)
    user_delay: timedelta = timedelta(seconds=1)
    """The spacing after ``per_user`` failures; it doubles with every further failure."""
    max_user_delay: timedelta = timedelta(seconds=30)
    """The longest the owner of a username under attack waits between attempts."""


def attempt_key(username: str) -> str:
    """What attempts for ``username`` are counted under (also for names with no account)."""
    return username.strip().lower()[:MAX_KEY]


class SignInThrottled(Exception):
    """Too many failed attempts; ``retry_after`` is in whole seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many failed sign-in attempts; try again in {retry_after} s")
        self.retry_after = retry_after


async def reserve(store: Store, limits: SignInLimits, username: str, client: str) -> None:
    """Record an attempt as failed before its password is checked, or raise SignInThrottled.

    Refused, nothing is recorded. Allowed, the attempt counts as a failure until
    ``succeeded`` clears it, so concurrent attempts are counted as they start.
    """
    params = {
        "username": username,
        "client": client,
        "window": limits.window,
        "per_pair": limits.per_pair,
        "per_client": limits.per_client,
        "per_user": limits.per_user,
        "user_delay": limits.user_delay,
        "max_user_delay": limits.max_user_delay,
    }
    async with store.connection() as conn:
        await conn.execute(LOCK, params)
        await conn.execute(PURGE, params)
        (wait,) = await (await conn.execute(RESERVE, params)).fetchone()
    if wait is not None and wait > 0:
        raise SignInThrottled(max(1, math.ceil(float(wait))))


async def succeeded(store: Store, username: str, client: str) -> None:
    """The password was right: this username's failures from this address are forgiven."""
    async with store.connection() as conn:
        await conn.execute(SUCCEEDED, (username, client))


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def trusted_networks(proxies: Sequence[str]) -> tuple[Network, ...]:
    """The trusted proxies (addresses or networks such as ``10.0.0.0/8``), checked once."""
    networks = []
    for proxy in proxies:
        try:
            networks.append(ipaddress.ip_network(proxy.strip(), strict=False))
        except ValueError:
            raise ValueError(
                f"a trusted proxy is an IP address or network (like 10.0.0.0/8), not {proxy!r}"
            ) from None
    return tuple(networks)


def client_address(peer: str, forwarded_for: str, trusted: Sequence[Network]) -> str:
    """The address a sign-in is counted against.

    ``X-Forwarded-For`` is believed only when the connection comes from a trusted proxy;
    then the nearest forwarded address that is not itself a trusted proxy is the client.
    Anyone can send the header, so without a trusted proxy it is ignored.
    """
    if not _within(peer, trusted):
        return peer
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _within(hop, trusted):
            return hop[:MAX_KEY]
    return hops[0] if hops else peer  # every hop is a proxy of ours: the first is the client


def _within(address: str, networks: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)
