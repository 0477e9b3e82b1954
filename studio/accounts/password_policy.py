"""What a new password must be: long enough, not a well-known one, not the username.

The common-password list (``common_passwords.txt``, one a line, lower case) holds a few
hundred of the passwords that lead every published breach list, limited to those that
are long enough to pass the length rule at all. A password is refused when it equals
one of them ignoring case and spaces, so ``Password 1234`` is refused like
``password1234``.

A password containing the username (ignoring case) is refused too, when the username
has at least ``MIN_USERNAME_IN_PASSWORD`` characters: shorter names (``al``, ``jo``)
occur inside too many good passphrases to be worth refusing.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

MIN_PASSWORD_LENGTH = 10
MAX_PASSWORD_LENGTH = 256
MIN_USERNAME_IN_PASSWORD = 3
COMMON_PASSWORDS = Path(__file__).resolve().parent / "common_passwords.txt"


class PasswordRejected(ValueError):
    """A new password does not meet the rules; the message says which."""


def check_new_password(password: str, username: str) -> None:
    """Raise PasswordRejected, saying what is wrong, unless ``password`` may be used."""
    if not MIN_PASSWORD_LENGTH <= len(password) <= MAX_PASSWORD_LENGTH:
        raise PasswordRejected(
            f"a password needs {MIN_PASSWORD_LENGTH} to {MAX_PASSWORD_LENGTH} characters"
        )
    if _plain(password) in common_passwords():
        raise PasswordRejected(
            "that password is on the list of the most common passwords; choose another"
        )
    name = username.strip().lower()
    if len(name) >= MIN_USERNAME_IN_PASSWORD and name in password.lower():
        raise PasswordRejected("a password must not contain the username")


@cache
def common_passwords() -> frozenset[str]:
    """The built-in list, read once."""
    lines = COMMON_PASSWORDS.read_text(encoding="utf-8").splitlines()
    return frozenset(_plain(line) for line in lines if line.strip())


def _plain(password: str) -> str:
    return "".join(password.lower().split())
