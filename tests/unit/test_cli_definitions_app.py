"""``wayline definition check --app MODULE:APP``, in-process: an app's machines and code
workflows, the lint's lines for code that would not replay the same."""

from __future__ import annotations

import pytest

from engine.cli.main import main
from examples import documents
from tests.fixtures.journal.outlines import app as outlines_app

BAD_CLOCK = "tests.fixtures.journal.bad_clock:app"


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    status = main(["definition", "check", *args])
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err


def test_code_that_reads_the_clock_is_refused_with_its_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert check(capsys, "--app", BAD_CLOCK) == (
        1,
        [
            "bad-clock@1 line 9: time.time() is not available in workflow code; "
            "use ctx.now() or call it inside ctx.step"
        ],
        "",
    )


def test_every_workflow_of_a_clean_app_is_ok_with_its_fingerprint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = check(capsys, "--app", "tests.fixtures.journal.outlines:app")
    assert (status, err) == (0, "")
    assert out == [f"ok {flow.ref} {flow.fingerprint}" for flow in outlines_app.workflows]


def test_an_apps_machines_are_checked_too(capsys: pytest.CaptureFixture[str]) -> None:
    definition = documents.flow.definition
    assert check(capsys, "--app", "examples.documents:app") == (
        0,
        [f"ok {definition.ref} {definition.fingerprint}"],
        "",
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tests.fixtures.journal.absent:app", "cannot load tests.fixtures.journal.absent:app"),
        ("tests.e2e.app:app", "tests.e2e.app:app declares no state machines or code workflows"),
    ],
)
def test_an_app_that_cannot_be_checked_says_why_in_one_line(
    capsys: pytest.CaptureFixture[str], spec: str, message: str
) -> None:
    status, out, err = check(capsys, "--app", spec)
    assert (status, out) == (1, [])
    assert err.startswith(f"wayline definition check: {message}")
    assert len(err.splitlines()) == 1


def test_a_file_and_an_app_together_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        check(capsys, "examples/document_approval.json", "--app", BAD_CLOCK)
    assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
