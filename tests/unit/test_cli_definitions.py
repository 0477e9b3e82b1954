"""`wayline definition check`, run in-process on the shipped example and broken copies."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from engine.cli.main import main
from engine.model.validation import parse_definition

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "order_fulfillment.json"


def check(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    """Exit status, stdout lines and stderr of ``wayline definition check PATH``."""
    status = main(["definition", "check", str(path)])
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err


def example() -> dict[str, Any]:
    return json.loads(EXAMPLE.read_text(encoding="utf-8"))


def write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "definition.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_example_is_the_order_fulfillment_flow() -> None:
    definition = parse_definition(example())
    assert (definition.name, definition.version) == ("order.fulfillment", "1")
    assert [(step.name, step.kind.value) for step in definition.steps] == [
        ("reserve", "activity"),
        ("charge", "activity"),
        ("checks", "parallel"),
        ("fraud_check", "activity"),
        ("inventory_check", "activity"),
        ("checks_done", "join"),
        ("manager_approval", "approval"),
        ("delivery", "race"),
        ("shipped", "signal"),
        ("delivery_timeout", "timer"),
        ("notify", "activity"),
    ]
    steps = {step.name: step for step in definition.steps}
    assert steps["reserve"].target == "inventory.reserve"
    assert steps["reserve"].compensation.target == "inventory.release"
    assert steps["charge"].target == "payments.charge"
    assert steps["charge"].compensation.target == "payments.refund"
    assert steps["checks"].branches == steps["checks_done"].branches
    assert steps["delivery"].branches == ("shipped", "delivery_timeout")
    assert steps["notify"].target == "notifications.send"


def test_check_prints_ok_with_name_version_and_fingerprint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = check(EXAMPLE, capsys)
    fingerprint = parse_definition(example()).fingerprint
    assert (status, out, err) == (0, [f"ok order.fulfillment@1 {fingerprint}"], "")
    assert re.fullmatch(r"[0-9a-f]{64}", fingerprint)


def test_check_lists_every_field_error_with_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = example()
    broken["owner"] = "ops"
    broken["steps"][1]["retry"]["max_attempts"] = 0
    broken["steps"][6]["timeout"] = "1.5s"
    status, out, err = check(write(tmp_path, broken), capsys)
    assert status == 1
    assert err == ""
    assert [line.split(": ", 1)[0] for line in out] == [
        "owner",
        "steps[1].retry.max_attempts",
        "steps[6].timeout",
    ]
    assert out[1] == "steps[1].retry.max_attempts: must be a whole number from 1 to 1000"


def test_check_lists_structural_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = example()
    broken["steps"][5]["branches"] = ["fraud_check"]
    status, out, _ = check(write(tmp_path, broken), capsys)
    assert status == 1
    assert out == [
        "steps[5].branches: must list exactly the branches of one parallel step",
        "steps[2].branches: needs exactly one join after it",
    ]


def test_check_names_the_whole_document_when_it_is_not_an_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = check(write(tmp_path, [example()]), capsys)
    assert (status, out) == (1, ["(document): must be a JSON object"])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"name": "order.fulfillment",', "is not valid JSON: Expecting property name"),
        ("not json", "is not valid JSON: Expecting value at line 1 column 1"),
        ("", "is not valid JSON"),
        ('{"fan_out_limit": ' + "9" * 5000 + "}", "is not usable JSON: it holds a number of"),
        ('{"steps": ' + "[" * 1000 + "]" * 1000 + "}", "is nested too deeply: at most 100 levels"),
        ('{"name": "a\\u0000b"}', "contains a NUL character"),
    ],
)
def test_check_reports_a_non_json_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    path = tmp_path / "definition.json"
    path.write_text(content, encoding="utf-8")
    status, out, err = check(path, capsys)
    assert (status, out) == (1, [])
    assert err.count("\n") == 1
    assert err.startswith(f"wayline definition check: {path} ")
    assert message in err


@pytest.mark.parametrize("name", ["missing.json", "."], ids=["missing", "directory"])
def test_check_reports_an_unreadable_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    path = tmp_path / name
    status, out, err = check(path, capsys)
    assert (status, out) == (1, [])
    assert err.count("\n") == 1
    assert err.startswith(f"wayline definition check: cannot read {path}: ")


def test_check_reports_a_file_that_is_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "definition.json"
    path.write_bytes(b'{"name": "\xff"}')
    status, _, err = check(path, capsys)
    assert status == 1
    assert err == (
        f"wayline definition check: {path} is not UTF-8 text: "
        "byte 0xff at offset 10 cannot be read as UTF-8\n"
    )
