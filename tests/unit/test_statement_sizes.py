"""The statements sent at every step stay within what psycopg caches the parsing of."""

from __future__ import annotations

import re

import pytest
from psycopg import _queries

from engine.store.statements import leases as lease_sql
from engine.store.statements import transitions as transition_sql

# psycopg parses a statement's %(name)s placeholders again at every execution when the
# statement is longer than this (or has more parameters): a regular expression over
# 4 KB of SQL for every step, which was the worker's largest single cost.
PARSE_CACHED_LENGTH = _queries.MAX_CACHED_STATEMENT_LENGTH
PARSE_CACHED_PARAMETERS = _queries.MAX_CACHED_STATEMENT_PARAMS


@pytest.mark.parametrize(
    "name, statement",
    [
        ("FENCED_WRITE", lease_sql.FENCED_WRITE),
        ("TAKING_WRITE", lease_sql.TAKING_WRITE),
        ("WRITE_TRANSITION", transition_sql.WRITE_TRANSITION),
        ("START_TRANSITION", transition_sql.START_TRANSITION),
        ("CLAIM", lease_sql.CLAIM),
    ],
)
def test_hot_statements_are_parsed_once(name: str, statement: str) -> None:
    assert len(statement.encode()) <= PARSE_CACHED_LENGTH, name
    assert len(set(re.findall(r"%\((\w+)\)s", statement))) <= PARSE_CACHED_PARAMETERS, name
