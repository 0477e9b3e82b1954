"""End to end through the command line: every command is a ``wayline`` subprocess.

What is checked is what a person at a terminal sees: the exit status, the one line a
command answers with, and for bad input a one-line message on stderr (never a
traceback, never driver text). A worker process runs the instances the CLI drives.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from typing import TYPE_CHECKING

import pytest

from engine.api.client import Client
from engine.cli import main as cli_main
from engine.model.definitions import Definition, definition_to_json
from engine.model.events import EventKind
from engine.model.instance import AttemptStatus, InstanceStatus
from engine.store import catalog
from engine.store.errors import CommitUnknown
from tests.e2e import definitions as d
from tests.e2e.app import SCRIPTED_FAILURE, Behaviour, script, undo_key
from tests.e2e.conftest import WAYLINE

if TYPE_CHECKING:
    from tests.e2e.conftest import CliResult, Harness

S = InstanceStatus
A = AttemptStatus


def one_line(result: CliResult) -> str:
    """The single stderr line of a failed command (and nothing on stdout)."""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert result.stdout == ""
    return lines[0]


def argument_error(result: CliResult) -> str:
    """The one stderr line that says which argument was refused (exit 2, no usage
    synopsis above it, no traceback)."""
    assert result.code == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    return line


async def publish(e2e: Harness, definition: Definition) -> CliResult:
    """``wayline definition publish`` of ``definition`` written to a file."""
    path = e2e.tmp / f"{definition.name}.json"
    path.write_text(json.dumps(definition_to_json(definition)))
    return await e2e.cli("definition", "publish", str(path))


async def start_signalled(e2e: Harness, instance_id: str) -> None:
    """Publish ``e2e.signalled`` and start ``instance_id`` of it."""
    await publish(e2e, d.SIGNALLED)
    await ok(e2e, "start", "e2e.signalled", "--id", instance_id)


COMMAND_ID = re.compile(r"command id: [0-9a-f]{32}")
"""The line after a recorded operator command: the id it was recorded under (made)."""


def recorded(output: str) -> str:
    """What an operator command says it recorded, checked to be followed by its id."""
    said, command_id, *rest = output.splitlines()
    assert COMMAND_ID.fullmatch(command_id) and not rest, output
    return said


async def ok(e2e: Harness, *args: str) -> str:
    """Run a command that must succeed; its stdout."""
    result = await e2e.cli(*args)
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


async def test_definition_publish_is_idempotent_and_listed(e2e: Harness) -> None:
    definition = d.SIGNALLED
    first = await publish(e2e, definition)
    assert (first.code, first.stdout) == (
        0,
        f"published {definition.ref} {definition.fingerprint}\n",
    )
    again = await publish(e2e, definition)
    assert (again.code, again.stdout) == (
        0,
        f"already published {definition.ref} {definition.fingerprint}\n",
    )
    listed = await ok(e2e, "definition", "list")
    assert listed == f"{definition.ref} {definition.fingerprint[:12]} 2 steps\n"


async def test_definition_publish_judges_running_instances_and_can_require_compatible(
    e2e: Harness,
) -> None:
    """Publishing prints the compatibility report of the instances of other versions;
    ``--require-compatible`` publishes nothing when one of them could not move."""
    await start_signalled(e2e, "order-77")
    await ok(e2e, "signal", "order-77", "go", "--signal-id", "go-77")
    without_after = d.definition("e2e.signalled", d.wait("go"), d.activity("later"), version="2")
    path = e2e.tmp / "v2.json"
    path.write_text(json.dumps(definition_to_json(without_after)))
    refused = await e2e.cli("definition", "publish", str(path), "--require-compatible")
    assert refused.code == 1
    report = [
        "e2e.signalled@2: 1 running checked: 0 compatible, 1 incompatible",
        "incompatible order-77 (v1): step after is in flight and was removed",
    ]
    assert refused.stdout.splitlines() == report
    assert refused.stderr == (
        "wayline definition publish: e2e.signalled@2 was not published: 1 running instance "
        "cannot move to it: order-77: step after is in flight and was removed\n"
    ), "it says that nothing was published, and why"
    assert "e2e.signalled@2" not in await ok(e2e, "definition", "list")
    published = await ok(e2e, "definition", "publish", str(path))
    assert published.splitlines() == [
        *report,
        f"published {without_after.ref} {without_after.fingerprint}",
    ]


async def test_definition_publish_refuses_a_child_of_another_team(e2e: Harness) -> None:
    """The command line is the engine's team (''): a parent pinned to a version only a
    studio team published is refused with the words of a missing one."""
    missing = await publish(e2e, d.PARENT)
    await catalog.publish(e2e.store, d.CHILD, "red", team="red")
    theirs = await publish(e2e, d.PARENT)

    assert (missing.code, theirs.code) == (1, 1)
    assert one_line(theirs) == one_line(missing)
    assert "step kid pins child definition e2e.child@1" in one_line(theirs)
    assert "not published in this team" in one_line(theirs)
    assert "e2e.parent" not in await ok(e2e, "definition", "list")


async def test_start_is_idempotent_and_refuses_other_input(e2e: Harness) -> None:
    await publish(e2e, d.SIGNALLED)
    start = ("start", "e2e.signalled@1", "--id", "order-1", "--input", '{"n": 1}')
    assert await ok(e2e, *start) == "started order-1 on e2e.signalled@1 (running)\n"
    again = await ok(e2e, *start)  # the same input again is a no-op, and says so
    assert again == "already started: joined order-1 on e2e.signalled@1 (running)\n"

    other = await e2e.cli("start", "e2e.signalled", "--id", "order-1", "--input", '{"n": 2}')
    assert other.code == 1
    assert one_line(other) == (
        "wayline start: instance order-1 already exists with another definition or input"
    )
    assert len(await e2e.history("order-1")) == 1, "the refused start wrote nothing"


async def test_inspect_says_how_each_earlier_attempt_of_a_step_ended(e2e: Harness) -> None:
    """The replayed instance keeps a step's latest attempt; ``inspect`` reads how the
    ones before it ended from the history, so a retried step does not hide them, each
    with the message its ``ActivityFailure`` gave (it was never recorded)."""
    await publish(e2e, d.RETRYING)
    await e2e.spawn()
    await e2e.start(d.RETRYING, "flaky", script({"flaky": Behaviour(fail=2)}))
    await e2e.settled("flaky", S.COMPLETED)

    lines = (await ok(e2e, "inspect", "flaky")).splitlines()
    at = next(n for n, line in enumerate(lines) if line.startswith("  activity flaky: "))
    assert lines[at].startswith("  activity flaky: succeeded attempt 3 ")
    assert lines[at + 1 : at + 3] == [
        f"    attempt 1: failed code={SCRIPTED_FAILURE}: flaky fails attempt 1",
        f"    attempt 2: failed code={SCRIPTED_FAILURE}: flaky fails attempt 2",
    ]


async def test_signal_pause_and_resume_drive_an_instance_to_completion(e2e: Harness) -> None:
    await publish(e2e, d.SIGNALLED)
    await e2e.spawn()
    await ok(e2e, "start", "e2e.signalled", "--id", "flow")
    paused = await ok(e2e, "command", "flow", "pause", "--actor", "ops", "--reason", "hold on")
    assert recorded(paused) == "pause recorded on flow (paused)"
    signalled = await ok(e2e, "signal", "flow", "go", "--signal-id", "go-1", "--payload", "{}")
    assert signalled == "signal go-1 accepted by flow (paused)\n", "buffered while paused"

    text = await ok(e2e, "inspect", "flow")
    assert text.splitlines()[0] == "instance flow: paused"
    assert "  signal go: received go-1" in text.splitlines()
    (audit,) = [line for line in text.splitlines() if line.startswith("  audit ")]
    assert " ops pause: hold on (" in audit, "who, what and why are on record"
    assert not e2e.calls("flow"), "nothing runs while paused"

    resumed = await ok(e2e, "command", "flow", "resume", "--actor", "ops", "--reason", "go on")
    assert recorded(resumed) == "resume recorded on flow (running)"
    await e2e.settled("flow", S.COMPLETED)

    state = json.loads(await ok(e2e, "inspect", "flow", "--json"))
    assert state["status"] == "completed"
    assert [(a["step"], a["status"]) for a in state["activities"]] == [("after", "succeeded")]
    assert [a["action"] for a in state["audit"]] == ["pause", "resume"]
    events = [
        json.loads(line) for line in (await ok(e2e, "history", "flow", "--json")).splitlines()
    ]
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "instance_started" and kinds[-1] == "completed"
    assert kinds.index("paused") < kinds.index("signal_received") < kinds.index("resumed")
    lines = (await ok(e2e, "history", "flow")).splitlines()
    assert lines[0].endswith(" instance_started definition=e2e.signalled@1 by cli")  # who
    pause, resume = [line for line in lines if " operator_command_recorded " in line]
    assert pause.endswith(" operator_command_recorded pause by ops: hold on"), "who, what, why"
    assert resume.endswith(" operator_command_recorded resume by ops: go on")


async def test_an_operator_command_prints_its_id_and_that_id_records_it_once(
    e2e: Harness,
) -> None:
    """The id was made and never shown: after a lost COMMIT answer the only way to learn
    whether a command stood recorded was to send it again under a new id, which records
    it twice (two retries of an activity) when the first one had been recorded."""
    await start_signalled(e2e, "twice")
    pause = ("command", "twice", "pause", "--actor", "ops", "--reason", "hold on")
    command_id = (await ok(e2e, *pause)).splitlines()[1].removeprefix("command id: ")
    again = await ok(e2e, *pause, "--command-id", command_id)
    assert (
        recorded(again) == "pause was recorded already (nothing recorded again) on twice (paused)"
    )
    state = json.loads(await ok(e2e, "inspect", "twice", "--json"))
    assert [a["action"] for a in state["audit"]] == ["pause"]


async def test_a_lost_commit_answer_names_the_command_id_to_give_again(
    e2e: Harness, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def lost(*args: object, **kwargs: object) -> None:
        raise CommitUnknown("command: the outcome is unknown")

    monkeypatch.setattr(Client, "command", lost)
    argv = ["command", "o-1", "retry-activity", "--step", "charge", "--actor", "ops"]
    argv += ["--reason", "x", "--command-id", "c-7", "--dsn", e2e.dsn, "--schema", e2e.schema]
    assert await asyncio.to_thread(cli_main.main, argv) == 1
    assert capsys.readouterr().err.splitlines() == [
        "wayline command: the outcome is unknown (the answer to the commit was lost): "
        "give the same command again with --command-id c-7 to learn it"
    ]


async def test_cancel_from_the_command_line_compensates(e2e: Harness) -> None:
    await publish(e2e, d.SAGA)
    await e2e.spawn()
    blocked = script({"ship": Behaviour(block=e2e.gate("ship"))})
    await ok(e2e, "start", "e2e.saga", "--id", "cancel", "--input", json.dumps(blocked))
    await e2e.until(lambda: e2e.calls("cancel", step="ship"), what="ship in flight")

    cancelled = await ok(e2e, "command", "cancel", "cancel", "--actor", "ops", "--reason", "no")
    assert recorded(cancelled) == "cancel recorded on cancel (cancelling)"
    e2e.release("ship")
    await e2e.settled("cancel", S.CANCELLED)
    text = (await ok(e2e, "inspect", "cancel")).splitlines()
    assert text[0] == "instance cancel: cancelled"
    for step in ("reserve", "charge", "ship"):
        assert f"  compensation {step}: succeeded attempt 1" in text


async def test_bad_input_gets_one_line_and_a_non_zero_exit(e2e: Harness) -> None:
    await publish(e2e, d.SIGNALLED)

    bad_json = await e2e.cli("start", "e2e.signalled", "--id", "x", "--input", "{nope")
    assert argument_error(bad_json) == "wayline start: error: argument --input: must be valid JSON"

    for command in (
        ("inspect", "missing"),
        ("history", "missing"),
        ("signal", "missing", "go", "--signal-id", "s"),
        ("command", "missing", "pause", "--actor", "ops", "--reason", "why"),
    ):
        result = await e2e.cli(*command)
        assert result.code == 1
        assert one_line(result) == (
            f"wayline {command[0]}: instance missing does not exist"
            " (an instance started in the studio is stored as TEAM:missing)"
        )
    with_team = await e2e.cli("inspect", "acme:missing")
    assert one_line(with_team) == "wayline inspect: instance acme:missing does not exist"

    unknown = await e2e.cli("start", "no.such.definition", "--id", "x")
    assert unknown.code == 1
    assert (
        one_line(unknown) == "wayline start: no active version of no.such.definition is published"
    )

    no_version = await e2e.cli("start", "e2e.signalled@", "--id", "x")
    assert (no_version.code, one_line(no_version)) == (
        1,
        "wayline start: name a version after @, or leave the @ out",
    )
    assert await e2e.query("SELECT instance_id FROM instances") == []

    no_dsn = await e2e.cli("inspect", "x", store=False)
    assert no_dsn.code == 2
    assert one_line(no_dsn) == "wayline inspect: no database given: pass --dsn or set WAYLINE_DSN"


# Operator verbs, input limits, pipes and bytes that are not UTF-8 -------------------------


def audit_of(state: dict) -> list[tuple[str, str, str]]:
    """(action, actor, reason) of each operator command, from ``inspect --json``."""
    return [(a["action"], a["actor"], a["reason"]) for a in state["audit"]]


async def test_approve_from_the_command_line_is_audited_like_the_studio(e2e: Harness) -> None:
    await publish(e2e, d.APPROVED)
    await e2e.spawn()
    await ok(e2e, "start", "e2e.approved", "--id", "deal")
    assert (await ok(e2e, "inspect", "deal")).endswith("\n  now: waiting for approval sign\n")
    approve = ("command", "deal", "approve", "--actor", "ann", "--reason", " signed off ")
    approved = await ok(e2e, *approve, "--step", "sign", "--payload", '{"by": "ann"}')
    assert recorded(approved) == "approve recorded on deal (running)"
    await e2e.settled("deal", S.COMPLETED)
    state = json.loads(await ok(e2e, "inspect", "deal", "--json"))
    assert audit_of(state) == [("approve", "ann", "signed off")], "the reason is trimmed"
    assert "now:" not in await ok(e2e, "inspect", "deal"), "an ended instance waits for nothing"


async def test_unknown_outcomes_are_retried_and_resolved_from_the_command_line(
    e2e: Harness,
) -> None:
    await e2e.spawn()
    unsure = script({"risky": Behaviour(unknown=True)})
    for instance in ("retried", "resolved"):
        await e2e.start(d.HOLD_ON_UNKNOWN, instance, unsure)
        await e2e.activity_reaches(instance, "risky", A.UNKNOWN)
    who = ("--actor", "ops", "--reason", "checked the ledger", "--step", "risky")

    retried = await ok(e2e, "command", "retried", "retry-activity", *who)
    assert recorded(retried) == "retry-activity recorded on retried (running)"
    await e2e.until(lambda: len(e2e.calls("retried")) == 2, what="the retry's call")
    first, second = e2e.calls("retried")
    assert first["key"] == second["key"], "an unknown outcome is retried with its own key"

    settle = ("--resolution", "succeeded", "--result", '{"charged": true}')
    resolved = await ok(e2e, "command", "resolved", "resolve-activity", *who, *settle)
    assert recorded(resolved) == "resolve-activity recorded on resolved (completed)"
    state = json.loads(await ok(e2e, "inspect", "resolved", "--json"))
    assert audit_of(state) == [("resolve_activity", "ops", "checked the ledger")]


async def test_a_failed_compensation_is_resolved_from_the_command_line(e2e: Harness) -> None:
    await e2e.spawn()
    failing = {"ship": Behaviour(terminal=True), undo_key("charge"): Behaviour(terminal=True)}
    await e2e.start(d.SAGA, "refund", script(failing))

    async def undo_failed() -> bool:
        progress = (await e2e.state("refund")).compensations.get("charge")
        return progress is not None and progress.status is A.FAILED

    await e2e.until(undo_failed, what="the failed compensation of charge")
    early = await e2e.cli(
        "command", "refund", "compensate", "--step", "ship", "--actor", "ops", "--reason", "x"
    )
    assert early.code == 1, "compensate reaches the engine, which says why not"
    assert "has not succeeded" in one_line(early)

    resolved = await ok(
        e2e,
        *("command", "refund", "resolve-compensation", "--step", "charge"),
        *("--code", "refunded-by-hand", "--evidence", "refunded by phone"),
        *("--actor", "ops", "--reason", "the bank confirmed"),
    )
    assert resolved.startswith("resolve-compensation recorded on refund (")
    await e2e.settled("refund", S.FAILED)
    state = json.loads(await ok(e2e, "inspect", "refund", "--json"))
    assert audit_of(state) == [("resolve_compensation", "ops", "the bank confirmed")]
    (event,) = await e2e.kinds("refund", EventKind.COMPENSATION_MANUALLY_RESOLVED)
    assert (event.code, event.value()) == ("refunded-by-hand", "refunded by phone")


@pytest.mark.parametrize(
    ("options", "code", "message"),
    [
        (("approve",), 2, "approve needs --step"),
        (("pause", "--step", "sign"), 2, "pause does not take --step"),
        (("resolve-activity", "--step", "sign"), 2, "resolve-activity needs --resolution"),
        (
            ("resolve-activity", "--step", "sign", "--resolution", "failed", "--result", "1"),
            2,
            "resolve-activity takes --result only with --resolution succeeded",
        ),
        (("approve", "--step", "sign", "--code", "x"), 2, "approve does not take --code"),
        *(  # used to be exit 1 naming an event: "compensation_manually_resolved event 2: ..."
            (
                ("resolve-compensation", "--step", "sign", "--code", code),
                2,
                "error: argument --code: the code must be 1 to 200 (MAX_CODE_LENGTH) "
                "printable characters, not only spaces",
            )
            for code in (" ", "x" * 201)
        ),
        (
            ("approve", "--step", "bad name!"),
            1,
            "the step must be 1 to 200 characters: ASCII letters, digits, '.', '_' or '-', "
            "starting with a letter or digit",
        ),
        (("approve", "--step", "nosuch"), 1, "'nosuch' is not a step of e2e.approved@1"),
    ],
)
async def test_operator_verbs_say_which_option_is_wrong(
    e2e: Harness, options: tuple[str, ...], code: int, message: str
) -> None:
    await publish(e2e, d.APPROVED)
    await ok(e2e, "start", "e2e.approved", "--id", "deal")
    result = await e2e.cli("command", "deal", *options, "--actor", "ops", "--reason", "why")
    assert (result.code, one_line(result)) == (code, f"wayline command: {message}")
    assert len(await e2e.history("deal")) == 1, "nothing was recorded"


async def test_start_refuses_an_input_over_the_smallest_activity_input_limit(
    e2e: Harness,
) -> None:
    await publish(e2e, d.SIGNALLED)
    big = json.dumps("x" * d.LIMIT)
    result = await e2e.cli("start", "e2e.signalled", "--id", "big", "--input", big)
    assert result.code == 1
    assert one_line(result) == (
        f"wayline start: the input is {len(big)} bytes; step after accepts at most {d.LIMIT}"
    )
    missing = await e2e.cli("inspect", "big")
    assert one_line(missing).startswith("wayline inspect: instance big does not exist"), (
        "nothing written"
    )


async def test_json_nested_too_deeply_is_refused_in_one_line(e2e: Harness) -> None:
    await start_signalled(e2e, "deep")
    deep = "[" * 1000 + "]" * 1000
    for command in (
        ("start", "e2e.signalled", "--id", "deeper", "--input", deep),
        ("signal", "deep", "go", "--signal-id", "s", "--payload", deep),
    ):
        result = await e2e.cli(*command)
        assert argument_error(result).endswith(
            "the value is nested too deeply: at most 100 levels of arrays and objects"
        )


async def test_arguments_that_are_not_utf8_are_refused_in_words(e2e: Harness) -> None:
    await start_signalled(e2e, "latin")
    latin1 = "café".encode("latin-1")
    result = await e2e.cli("command", "latin", "pause", "--actor", "ops", "--reason", latin1)
    assert result.code == 2
    assert one_line(result) == (
        "wayline command: the reason is not UTF-8 text: byte 0xe9 cannot be read as UTF-8"
    )
    payload = await e2e.cli("signal", "latin", "go", "--signal-id", "s", "--payload", b'"\xe9"')
    assert argument_error(payload).endswith(
        "the value is not UTF-8 text: byte 0xe9 cannot be read as UTF-8"
    )


async def test_history_into_a_closed_pipe_ends_quietly(e2e: Harness) -> None:
    """``wayline history ID | head -1``: the reader leaves; the command stops, silently."""
    await start_signalled(e2e, "piped")
    reader, writer = os.pipe()
    os.close(reader)  # as head does once it has its line
    try:
        process = await asyncio.create_subprocess_exec(
            WAYLINE,
            *("history", "piped", "--dsn", e2e.dsn, "--schema", e2e.schema),
            stdout=writer,
            stderr=asyncio.subprocess.PIPE,
            env=e2e.env(),
        )
    finally:
        os.close(writer)
    _, err = await asyncio.wait_for(process.communicate(), 20)
    assert (process.returncode, err.decode()) == (0, "")


async def test_start_with_wait_prints_how_the_instance_ended_and_exits_by_it(
    e2e: Harness,
) -> None:
    """``--wait`` awaits the end (``Client.wait``): exit 0 only when it completed; a
    failure or a timeout exits 1 with one line on stderr after the start's answer (a
    timeout's says what the instance waits for: the user waited for nothing otherwise)."""
    await publish(e2e, d.THREE_STEPS)
    await publish(e2e, d.SIGNALLED)
    await e2e.spawn()

    done = await ok(e2e, "start", "e2e.three", "--id", "waited", "--wait", "20")
    failing = json.dumps(script({"two": Behaviour(terminal=True)}))
    failed = await e2e.cli(
        "start", "e2e.three", "--id", "fails", "--input", failing, "--wait", "20"
    )
    stuck = await e2e.cli("start", "e2e.signalled", "--id", "stuck", "--wait", "0.3")

    assert done.splitlines() == [
        f"started waited on {d.THREE_STEPS.ref} (running)",
        "ended waited (completed)",
    ]
    assert (failed.code, failed.stdout.splitlines()) == (
        1,
        [f"started fails on {d.THREE_STEPS.ref} (running)", "ended fails (failed)"],
    )
    assert failed.stderr == (  # it said no more than "it ended failed": not why
        "wayline start: fails did not complete: it ended failed; "
        "failure two: scripted-terminal: two cannot succeed\n"
    )
    assert (stuck.code, stuck.stdout) == (1, f"started stuck on {d.SIGNALLED.ref} (running)\n")
    assert stuck.stderr == (
        "wayline start: instance stuck did not end within 0.3 s: it is running; "
        "now: waiting for signal go\n"
    )


async def test_a_wait_outside_its_limit_is_refused_before_anything_starts(e2e: Harness) -> None:
    await publish(e2e, d.SIGNALLED)

    for seconds in ("0", "-1", "86401", "soon"):
        refused = await e2e.cli("start", "e2e.signalled", "--id", "never", "--wait", seconds)
        assert argument_error(refused) == (
            "wayline start: error: argument --wait: must be a number of seconds more than 0 "
            "and at most 86400 (MAX_WAIT_TIMEOUT)"
        )
    assert await e2e.query("SELECT instance_id FROM instances") == []
