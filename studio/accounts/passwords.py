"""Password hashing with argon2id, a memory-hard KDF, off the event loop.

Hashes carry their own parameters, so they can be raised later: ``needs_rehash`` tells
the sign-in to store a fresh hash after a successful check. Checking an unknown user
still costs one hash computation (against a fixed dummy hash), so response time does
not reveal which usernames exist.

argon2 is meant to be slow (tens to hundreds of milliseconds of CPU), so it never runs
on the event loop: ``hash_password`` and ``verify_password`` hand it to a pool of
``HASH_THREADS`` threads (argon2-cffi releases the GIL while it works). A burst of
sign-ins then queues for those threads while every other page keeps being served, and
no burst can take more than that many cores.

The cost is process-wide (``configure``), set once by the app from its settings. The
default is argon2-cffi's (64 MiB, 3 passes, 4 lanes); the test suite lowers it because
it creates hundreds of accounts, which changes speed and nothing else.
"""

from __future__ import annotations

import asyncio
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from studio.accounts.password_policy import MAX_PASSWORD_LENGTH, check_new_password

HASH_THREADS = 2
"""How many argon2 computations run at once (each holds its memory cost while it runs)."""

_pool = ThreadPoolExecutor(HASH_THREADS, thread_name_prefix="argon2")


@dataclass(frozen=True)
class Argon2Cost:
    time_cost: int = 3
    memory_cost_kib: int = 65536
    parallelism: int = 4

    def hasher(self) -> PasswordHasher:
        return PasswordHasher(self.time_cost, self.memory_cost_kib, self.parallelism)


_hasher = Argon2Cost().hasher()
_dummy_hash = _hasher.hash(secrets.token_urlsafe(16))


def configure(cost: Argon2Cost) -> None:
    """Use ``cost`` for new hashes (and the unknown-user check) from now on."""
    global _hasher, _dummy_hash
    _hasher = cost.hasher()
    _dummy_hash = _hasher.hash(secrets.token_urlsafe(16))


async def hash_password(password: str, username: str) -> str:
    """The hash of a new password for ``username``; PasswordRejected when it is too weak."""
    check_new_password(password, username)
    return await asyncio.get_running_loop().run_in_executor(_pool, _hasher.hash, password)


async def rehash_password(password: str) -> str:
    """A fresh hash of a password that was just verified (its parameters were old)."""
    return await asyncio.get_running_loop().run_in_executor(_pool, _hasher.hash, password)


async def verify_password(stored_hash: str | None, password: str) -> bool:
    """True when ``password`` matches; also spends the time when there is no user."""
    return await asyncio.get_running_loop().run_in_executor(_pool, _verify, stored_hash, password)


def _verify(stored_hash: str | None, password: str) -> bool:
    if len(password) > MAX_PASSWORD_LENGTH:
        return False
    try:
        return _hasher.verify(stored_hash or _dummy_hash, password) and stored_hash is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def needs_rehash(stored_hash: str) -> bool:
    return _hasher.check_needs_rehash(stored_hash)


def generate_password() -> str:
    """A one-time password: 16 URL-safe characters (96 bits)."""
    return secrets.token_urlsafe(12)
