"""Values that come from outside: JSON text read with bounds, and text that can be stored.

Every entry point that takes a value from a person or a program (the client API, the
command line, the studio's forms and JSON bodies) reads JSON with ``read_json`` and
checks values with ``check_value``, so one rule says what is accepted everywhere:

- JSON nested at most ``MAX_JSON_DEPTH`` levels (deeper documents are refused with an
  error, never a ``RecursionError``);
- numbers that are finite (``1e999`` parses as infinity, which JSON cannot carry);
- text without NUL characters (PostgreSQL text cannot hold them) and without lone
  surrogates (not Unicode text: what Python makes of bytes that are not UTF-8);
- only what JSON carries (``JSON_TYPES``, objects with text keys): a set, a datetime or
  bytes is refused naming its type, not left to fail inside the JSON encoder.

Messages name the value (``what``) and the problem, never the value itself.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Mapping
from typing import Any

from engine.model.errors import InputRefused, LimitExceeded, NotJSON
from engine.model.events import json_data
from engine.model.identifiers import team_problem
from engine.model.limits import MAX_JSON_DEPTH

JSON_TYPES = (str, int, float, bool, type(None), Mapping, list, tuple)
"""The Python values ``check_value`` takes: what the JSON encoder writes as JSON."""
JSON_TYPES_WORDS = "dicts with str keys, lists, str, int, float, bool and None"

UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
ESCAPED_BYTES = range(0xDC80, 0xDD00)
"""Lone surrogates Python's ``surrogateescape`` makes of bytes that are not UTF-8
(command-line arguments, file names): U+DC80 + the byte."""


def read_json(text: str | bytes, what: str) -> Any:
    """The JSON value of ``text``; InputRefused saying why when it is not acceptable.

    ``what`` names the value for the message, e.g. ``"the input"`` or a file name.
    NotJSON (an InputRefused) says the text is not JSON at all, so that callers can
    tell a typing mistake from a value they cannot take.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise InputRefused(too_deep(what)) from None
    except UnicodeDecodeError as error:
        raise NotJSON(f"{what} is not UTF-8 text: {undecodable(error)}") from None
    except json.JSONDecodeError as error:
        raise NotJSON(
            f"{what} is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from None
    except ValueError:  # the one other refusal: an integer longer than Python reads
        raise NotJSON(
            f"{what} is not usable JSON: it holds a number of more than "
            f"{sys.get_int_max_str_digits()} digits"
        ) from None
    check_value(value, what)
    return value


def json_or_text(text: str, what: str) -> Any:
    """``text`` as JSON when it is JSON, else the text itself; None when blank.

    For values that may be either, such as a compensation's evidence (``{"refund":
    "r-1"}`` or ``refunded by phone``). JSON that cannot be taken is still refused.
    """
    if not text.strip():
        return None
    try:
        return read_json(text, what)
    except NotJSON:
        check_text(text, what)
        return text


def check_value(value: Any, what: str) -> None:
    """Refuse a value that is not JSON (``JSON_TYPES``), too deep, with a non-finite
    number or unstorable text.

    Walks without recursion, so a value nested a million levels (or one that contains
    itself) is refused at ``MAX_JSON_DEPTH`` instead of exhausting the stack.
    """
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if not isinstance(item, JSON_TYPES):
            raise InputRefused(
                f"{what} holds a {type(item).__name__}, which is not JSON: use {JSON_TYPES_WORDS}"
            )
        if isinstance(item, str):
            check_text(item, what)
        elif isinstance(item, float) and not math.isfinite(item):
            raise InputRefused(f"{what} holds a number JSON cannot carry ({item})")
        elif isinstance(item, Mapping | list | tuple):
            if depth == MAX_JSON_DEPTH:
                raise InputRefused(too_deep(what))
            if isinstance(item, Mapping) and not all(isinstance(key, str) for key in item):
                raise InputRefused(
                    f"{what} holds a dict key that is not a str (JSON keys are text): "
                    f"use {JSON_TYPES_WORDS}"
                )
            children = [*item.keys(), *item.values()] if isinstance(item, Mapping) else item
            pending.extend((child, depth + 1) for child in children)


def check_team(team: object) -> None:
    """Refuse a team id that is not one (``team_problem``): it would name an export file
    or prefix instance ids, and a typo would act on a team that does not exist."""
    if problem := team_problem(team):
        raise InputRefused(problem)


def check_text(value: str, what: str) -> None:
    """Refuse a value that is not a str (an int as an instance id would otherwise fail
    as a TypeError deep in a query), or text that PostgreSQL cannot store or that is
    not Unicode."""
    if not isinstance(value, str):
        raise InputRefused(f"{what} must be a str, not {type(value).__name__}")
    found = UNSTORABLE.search(value)
    if found is None:
        return
    char = found.group()
    if char == "\x00":
        raise InputRefused(f"{what} contains a NUL character (\\u0000), which is not allowed")
    if ord(char) in ESCAPED_BYTES:
        raise InputRefused(
            f"{what} is not UTF-8 text: byte 0x{ord(char) - 0xDC00:02x} cannot be read as UTF-8"
        )
    raise InputRefused(f"{what} contains a lone surrogate (\\u{ord(char):04x}), not Unicode text")


def check_size(value: Any, limit: int, what: str, step: str = "") -> None:
    """Refuse a JSON value larger than ``limit`` bytes, measured as the engine stores it
    (canonical JSON), which is what a step's ``input_limit`` counts."""
    size = len((json_data(value) or "").encode())
    if size > limit:
        place = f"; step {step} accepts at most {limit}" if step else f"; at most {limit}"
        raise LimitExceeded(f"{what} is {size} bytes{place}")


def too_deep(what: str) -> str:
    return f"{what} is nested too deeply: at most {MAX_JSON_DEPTH} levels of arrays and objects"


def undecodable(error: UnicodeDecodeError) -> str:
    """A decoding error in words: which byte, where."""
    byte = error.object[error.start]
    return f"byte 0x{byte:02x} at offset {error.start} cannot be read as UTF-8"
