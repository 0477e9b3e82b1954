"""Enums stored as numbers and shown by name.

Statuses and kinds are small integers in PostgreSQL and in histories, and their
lower-case names (``attempt_started``, ``retry_waiting``) in JSON, the command line and
the studio; ``Labelled`` says that once for all of them.
"""

from __future__ import annotations

from enum import IntEnum


class Labelled(IntEnum):
    """An IntEnum whose ``label`` is its member's lower-case name."""

    @property
    def label(self) -> str:
        """The member's name in JSON and in the studio, e.g. ``attempt_started``.
        (``_name_``: the member's own attribute, which ``name`` reaches through the
        enum's descriptor; a label is read for every event written.)"""
        return self._name_.lower()
