"""Definitions with less ceremony: ``mode``, ``input_limit``, ``result_limit`` and
``retry`` may be left out and take their documented defaults; the canonical form writes
every field, so a document with the defaults written out has the same fingerprint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.model.definitions import definition_to_json
from engine.model.errors import DefinitionInvalid
from engine.model.validation import DEFAULT_MODE, parse_definition
from engine.modes.steps.validation import DEFAULT_PAYLOAD_LIMIT, DEFAULT_RETRY

WAYLINE = Path(sys.executable).parent / "wayline"
SHORT = {
    "name": "short",
    "version": "1",
    "steps": [
        {
            "name": "charge",
            "kind": "activity",
            "target": "pay.charge",
            "timeout": "30s",
            "compensation": {"target": "pay.refund", "timeout": "30s"},
        },
        {"name": "go", "kind": "signal", "target": "ops.go", "timeout": "1h"},
    ],
}
RETRY = {"max_attempts": 3, "initial_delay": "1s", "max_delay": "1m"}
WRITTEN_OUT = {
    "name": "short",
    "version": "1",
    "mode": "orchestration",
    "steps": [
        {
            "name": "charge",
            "kind": "activity",
            "target": "pay.charge",
            "timeout": "30s",
            "input_limit": 65536,
            "result_limit": 65536,
            "retry": RETRY,
            "compensation": {
                "target": "pay.refund",
                "timeout": "30s",
                "result_limit": 65536,
                "retry": RETRY,
            },
        },
        {"name": "go", "kind": "signal", "target": "ops.go", "timeout": "1h", "input_limit": 65536},
    ],
}


def test_left_out_fields_take_the_documented_defaults() -> None:
    definition = parse_definition(SHORT)
    charge, go = definition.steps
    assert definition.mode.value == DEFAULT_MODE
    assert (charge.input_limit, charge.result_limit) == (DEFAULT_PAYLOAD_LIMIT,) * 2
    assert charge.retry == DEFAULT_RETRY and charge.compensation.retry == DEFAULT_RETRY
    assert go.input_limit == DEFAULT_PAYLOAD_LIMIT


def test_the_defaults_written_out_are_the_same_definition() -> None:
    short, written = parse_definition(SHORT), parse_definition(WRITTEN_OUT)
    assert short.fingerprint == written.fingerprint
    assert definition_to_json(short) == definition_to_json(written)


@pytest.mark.parametrize(
    ("given", "taken"),
    [
        ({"max_attempts": 5}, {**RETRY, "max_attempts": 5}),
        ({"initial_delay": "5m"}, {**RETRY, "initial_delay": "5m", "max_delay": "5m"}),
        ({"max_delay": "10s"}, {**RETRY, "max_delay": "10s"}),
    ],
)
def test_a_retry_that_leaves_fields_out_takes_their_defaults(
    given: dict[str, object], taken: dict[str, object]
) -> None:
    """``{"max_attempts": 5}`` was refused for the two fields it left out, though a
    whole ``retry`` may be left out; a left-out ``max_delay`` is at least the
    ``initial_delay`` given."""
    partial, written = json.loads(json.dumps(SHORT)), json.loads(json.dumps(SHORT))
    partial["steps"][0]["retry"] = given
    written["steps"][0]["retry"] = taken
    assert parse_definition(partial).fingerprint == parse_definition(written).fingerprint


def test_a_max_delay_below_the_default_initial_delay_says_the_default() -> None:
    bad = json.loads(json.dumps(SHORT))
    bad["steps"][0]["retry"] = {"max_delay": "10ms"}
    with pytest.raises(DefinitionInvalid, match=r"must be at least initial_delay \(1s when"):
        parse_definition(bad)


def test_a_field_given_is_still_checked() -> None:
    bad = json.loads(json.dumps(SHORT))
    bad["steps"][0]["retry"] = {"max_attempts": 0}
    with pytest.raises(DefinitionInvalid) as refused:
        parse_definition(bad)
    assert "steps[0].retry" in str(refused.value)


def test_definition_check_accepts_a_short_document(tmp_path: Path) -> None:
    path = tmp_path / "short.json"
    path.write_text(json.dumps(SHORT))
    command = [WAYLINE, "definition", "check", str(path)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"ok short@1 {parse_definition(WRITTEN_OUT).fingerprint}")
