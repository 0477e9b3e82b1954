"""Password hashing with argon2id, a memory-hard KDF.

Hashes carry their own parameters, so they can be raised later: ``needs_rehash`` tells
the sign-in to store a fresh hash after a successful check. Checking an unknown user
still costs one hash computation (against a fixed dummy hash), so response time does
not reveal which usernames exist.

The cost is process-wide (``configure``), set once by the app from its settings. The
default is argon2-cffi's (64 MiB, 3 passes, 4 lanes); the test suite lowers it because
it creates hundreds of accounts, which changes speed and nothing else.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

MIN_PASSWORD_LENGTH = 10
MAX_PASSWORD_LENGTH = 256


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


class PasswordRejected(ValueError):
    """A new password does not meet the rules; the message says which."""


def hash_password(password: str) -> str:
    check_new_password(password)
    return _hasher.hash(password)


def verify_password(stored_hash: str | None, password: str) -> bool:
    """True when ``password`` matches; also spends the time when there is no user."""
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


def check_new_password(password: str) -> None:
    if not MIN_PASSWORD_LENGTH <= len(password) <= MAX_PASSWORD_LENGTH:
        raise PasswordRejected(
            f"a password needs {MIN_PASSWORD_LENGTH} to {MAX_PASSWORD_LENGTH} characters"
        )
