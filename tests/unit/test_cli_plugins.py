"""The studio's and the drills' ``wayline`` subcommands arrive through entry points.

The engine's command line imports neither package: ``studio`` and ``user`` come from
``studio.commands``, ``drill`` from ``verification.commands``, both named in the
``wayline.commands`` group of ``pyproject.toml``. A plugin that fails is one line on
stderr, and every other command still works.
"""

from __future__ import annotations

import argparse
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

import pytest

from engine.cli import main as cli
from engine.cli.main import COMMANDS_GROUP, build_parser, main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "order_fulfillment.json"


def subcommands(parser: argparse.ArgumentParser) -> set[str]:
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(action.choices)


def plugin(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=COMMANDS_GROUP)


def register_then_fail(commands: argparse._SubParsersAction) -> None:
    raise RuntimeError("no such thing\nsecond line")


@pytest.fixture
def with_plugins(monkeypatch: pytest.MonkeyPatch):
    """Make the command line see the installed plugins plus the given ones."""

    def install(*extra: EntryPoint) -> None:
        installed = list(entry_points(group=COMMANDS_GROUP))
        monkeypatch.setattr(cli, "entry_points", lambda group: [*installed, *extra])

    return install


def test_the_studio_and_the_drills_register_their_own_commands() -> None:
    installed = {e.name: e.value for e in entry_points(group=COMMANDS_GROUP)}
    assert installed == {
        "drills": "verification.commands:register",
        "studio": "studio.commands:register",
    }
    assert {"drill", "studio", "user", "demo", "worker"} <= subcommands(build_parser())


def test_a_plugin_that_cannot_be_imported_is_one_line_and_the_rest_works(
    with_plugins, capsys: pytest.CaptureFixture[str]
) -> None:
    with_plugins(plugin("broken", "wayline_no_such_plugin:register"))
    assert main(["definition", "check", str(EXAMPLE)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("ok order.fulfillment@1 ")
    assert captured.err.splitlines() == [
        "wayline: cannot load the broken commands (wayline_no_such_plugin:register): "
        "ModuleNotFoundError: No module named 'wayline_no_such_plugin'"
    ]


def test_a_plugin_that_fails_while_registering_is_one_line(
    with_plugins, capsys: pytest.CaptureFixture[str]
) -> None:
    with_plugins(plugin("odd", f"{__name__}:register_then_fail"))
    assert {"drill", "studio", "user"} <= subcommands(build_parser())
    assert capsys.readouterr().err.splitlines() == [
        f"wayline: cannot load the odd commands ({__name__}:register_then_fail): "
        "RuntimeError: no such thing"
    ]


def test_a_command_whose_plugin_failed_is_refused_after_the_reason(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        cli, "entry_points", lambda group: [plugin("studio", "wayline_gone.commands:register")]
    )
    with pytest.raises(SystemExit) as exit_:
        main(["studio"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("wayline: cannot load the studio commands (wayline_gone.commands")
    assert "invalid choice: 'studio'" in err
    assert "Traceback" not in err
