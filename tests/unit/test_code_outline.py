"""The outline of a code workflow, pinned: the studio draws exactly these nodes."""

from __future__ import annotations

from engine.modes.code.outline import without_lines
from tests.fixtures.journal.outlines import app


def outline_of(name: str) -> list[dict]:
    flow = app.workflow_for(name, "1")
    assert flow is not None
    return flow.outline


def step(name: str, line: int, retries: object = 1, timeout: object = None, **more: object):
    return {
        "verb": "step",
        "name": name,
        "line": line,
        "retries": retries,
        "timeout": timeout,
        "compensated": False,
        **more,
    }


def test_verbs_with_their_options_a_branch_and_returns() -> None:
    assert outline_of("order-saga") == [
        step("reserve", 23, retries=3, timeout="30s", compensated=True),
        {"verb": "race", "name": "", "line": 24, "timeout": "72h", "on": ["paid", "cancelled"]},
        {"if": "which != 'paid'", "line": 25, "then": [{"return": True, "line": 26}], "else": []},
        {"verb": "spawn", "name": "shipping", "line": 27},
        {"verb": "all", "name": "", "line": 28, "timeout": "7d", "on": ["shipment", "received"]},
        {"verb": "sleep", "name": "", "line": 29, "timeout": "1h"},
        step("settle", 30),
        {"return": True, "line": 30},
    ]


def test_loops_try_match_comprehensions_and_computed_names_show_their_source() -> None:
    assert outline_of("control") == [
        {"loop": "for item in order['items']", "line": 36, "body": [step("f'pack-{item}'", 37)]},
        {
            "loop": "while not await ctx.wait_signal('approved', timeout='1d')",
            "line": 38,
            "body": [
                {"verb": "wait", "name": "approved", "line": 38, "timeout": "1d"},
                {"verb": "sleep", "name": "", "line": 39, "timeout": 60},
            ],
        },
        {
            "try": True,
            "line": 40,
            "body": [step("charge", 41, retries="order['retries']")],
            "handlers": [
                {"catch": "StepFailed", "body": [step("refund", 43), {"raise": True, "line": 44}]}
            ],
        },
        {"verb": "now", "name": "", "line": 46},
        {
            "if": "order['kind'] matches 'express'",
            "line": 48,
            "then": [step("rush", 49)],
            "else": [],
        },
        {"loop": "for i in range(2)", "line": 52, "body": [step("f'label-{i}'", 52)]},
        {"if": "order['kind']", "line": 53, "then": [], "else": [step("fallback", 53)]},
        {"return": True, "line": 53},
    ]


def test_control_flow_without_verbs_and_nested_bodies_are_left_out() -> None:
    """The loop that only sums, and the ctx.step inside the nested body, are no nodes;
    ``compensate=None`` is no compensation."""
    assert outline_of("quiet") == [step("sum", 65), {"return": True, "line": 65}]


def test_the_fingerprinted_outline_has_no_line_numbers() -> None:
    assert without_lines(outline_of("order-saga"))[2] == {
        "if": "which != 'paid'",
        "then": [{"return": True}],
        "else": [],
    }
