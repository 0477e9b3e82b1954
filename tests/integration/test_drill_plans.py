"""Drill plans on the team's own workflow, through ``wayline drill`` as CI runs them.

Every plan shipped in ``examples/drills/`` runs against the test server and its
expected verdict is asserted: one is *expected* to leave ``charge`` in doubt (its
definition holds an unknown outcome for an operator), one stubs ``fraud_check`` with a
service that ignores idempotency keys, so its ``retry_same_key`` redelivery shows the
duplicate effect as a finding, and one recovers from cut COMMITs, a raised error and a
duplicated signal. Two drill the document-approval state machine: its decision
survives a killed worker, one that exits and a cut COMMIT; and a review service that is
always down ends the approval dead (by design: the verdict passes). Two drill the
code-first order saga with its own code: a charge whose worker died after its body ran
is in doubt, and lost signal acks, a cut COMMIT and an exit still settle the order (its
72 h, 7 day and 1 h waits passed by the drill's clock). A plan added there without an
expectation here fails the test.
The self-test's plan part proves a plan catches a broken engine build.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.store.embedded import PG_ROOT
from tests.drills.drill_command import drill
from verification.campaigns import target_for
from verification.scorecard import server_options
from verification.self_test import (
    MACHINE_PLAN_DRILL,
    MACHINE_PLAN_MUTANT,
    PLAN_DRILL,
    plan_self_test,
)

ROOT = Path(__file__).resolve().parents[2]
PLANS = ROOT / "examples" / "drills"
LAST_LINE = re.compile(r"drills: (\d+) passed, (\d+) failed")
EXPECTED = {
    "order_fulfillment.charge-in-doubt.json": (
        "passed",
        ["charge: UNKNOWN (in doubt), waiting for an operator"],
        "",
    ),
    "order_fulfillment.fraud-check-not-idempotent.json": (
        "failed",
        ["fraud_check: SUCCEEDED after 2 attempts"],
        "fraud_check: its effect happened 2 times under one idempotency key",
    ),
    "order_fulfillment.recovers.json": ("passed", ["instance: COMPLETED"], ""),
    "document_approval.review-recovers.json": (
        "passed",
        ["instance: COMPLETED", "Approved: CURRENT STATE after 2 transitions"],
        "",
    ),
    "order_saga.charge-in-doubt.json": (
        "passed",
        ["charge.1: UNKNOWN (in doubt), waiting for an operator"],
        "",
    ),
    "order_saga.settles.json": (
        "passed",
        ["instance: COMPLETED", "charge.1: SUCCEEDED", "settle.1: SUCCEEDED"],
        "",
    ),
    "document_approval.review-service-down.json": (
        "passed",
        [
            "instance: FAILED (dead-attempts-exhausted)",
            "InReview: CURRENT STATE after 1 transition, 3 failed attempts",
        ],
        "",
    ),
}
"""Per shipped plan: its verdict, lines its final state must include, and a finding."""


def _drill(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return drill(*args, timeout=120, env=env)


def test_every_shipped_plan_has_an_expected_verdict() -> None:
    assert sorted(p.name for p in PLANS.glob("*.json")) == sorted(EXPECTED)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_shipped_plan_gives_its_expected_verdict(name: str, pg_dsn: str, tmp_path: Path) -> None:
    verdict, state, finding = EXPECTED[name]
    card, junit = tmp_path / "card.json", tmp_path / "junit.xml"
    done = _drill(
        "run", "--plan", str(PLANS / name), "--dsn", pg_dsn, "--schema", "no_runs_here",
        "--json", str(card), "--junit", str(junit), "--artifacts", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == (1 if verdict == "failed" else 0), done.stdout + done.stderr
    assert LAST_LINE.fullmatch(done.stdout.strip().splitlines()[-1]), done.stdout[-2000:]
    scorecard = json.loads(card.read_text())
    (result,) = scorecard["drills"]
    plan = result["extra"]["plan"]
    assert result["verdict"] == verdict, result["failures"]
    assert all(pin["fired"] for pin in plan["pins"])
    # Each pin is planned once, however many workers arm it again after a kill or an
    # exit: a pin that fired is never reported "never reached".
    assert scorecard["faults"]["never_reached"] == [], scorecard["faults"]
    assert set(state) <= set(plan["state"]), plan["state"]
    own = "FAILED: the only fault its run fired; its finding is below" if finding else "passed: "
    for pin in plan["pins"]:  # each fired pin's own verdict, kept and printed beside it
        assert pin["verdict"] == verdict, pin
        assert f"  pin {pin['label']}: fired, {own}" in done.stdout, done.stdout
    assert any(finding in f for f in result["failures"]) if finding else not result["failures"]
    assert [f["step"] for f in plan["findings"]] == (["fraud_check"] if finding else [])
    for failure in result["failures"]:  # in the plan's section, not again in the scorecard
        assert done.stdout.count(failure) == 1, done.stdout
    if verdict == "failed":  # its reproduction reruns exactly this drill's plan, here
        where = server_options(pg_dsn, "no_runs_here")
        assert where.startswith(" --dsn ") and result["reproduce"].endswith(where)
        exact = result["reproduce"].removeprefix("wayline drill run --plan ").removesuffix(where)
        assert json.loads(Path(exact).read_text())["pins"][0]["step"] == "fraud_check"
    assert plan["history"][0]["kind"] == "instance_started"
    for line in state:
        assert f"state  {line}" in done.stdout
    assert "<testsuite" in junit.read_text()


@pytest.mark.timeout(120)
def test_pins_from_the_command_line_run_one_drill_each(pg_dsn: str, tmp_path: Path) -> None:
    card = tmp_path / "card.json"
    done = _drill(
        "run", "--definition", "examples/order_fulfillment.json",
        "--pin", "charge:after_attempt_start:kill", "--pin", "shipped:before_signal_ack:kill",
        "--for-each-pin", "--dsn", pg_dsn, "--schema", "no_runs_here", "--json", str(card),
        "--artifacts", str(tmp_path),
    )  # fmt: skip
    assert done.stdout.strip().endswith("drills: 2 passed, 0 failed"), done.stdout + done.stderr
    drills = json.loads(card.read_text())["drills"]
    assert [[p["label"] for p in d["extra"]["plan"]["pins"]] for d in drills] == [
        ["charge:after_attempt_start:kill"],
        ["shipped:before_signal_ack:kill"],
    ]
    charge = drills[0]["extra"]["plan"]
    assert "charge: UNKNOWN (in doubt), waiting for an operator" in charge["state"]
    assert charge["recovery_seconds"] is not None


def test_a_misshapen_pin_does_not_hide_a_step_the_definition_lacks() -> None:
    """Every problem at once: the hit of 0 (its shape), then the pin whose shape was
    fine but whose step the definition does not have, each at its pin."""
    done = _drill(
        "run", "--definition", "examples/order_fulfillment.json",
        "--pin", "charge:after_handler:kill#0", "--pin", "ship:after_handler:kill",
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    hit = done.stderr.index("pins[0].hit: must be a whole number from 1 to")
    assert done.stderr.index("pins[1] ship:after_handler:kill: no step 'ship'; steps:") > hit
    assert "drills:" not in done.stdout, "nothing ran"


@pytest.mark.timeout(120)
def test_a_cut_outcome_that_lost_its_race_is_settled_truthfully(
    pg_dsn: str, tmp_path: Path
) -> None:
    """Found by the full matrix: fraud_check's outcome, cut after the server got it,
    wrote nothing (inventory_check's outcome had taken its sequence); the engine's
    "did not take effect" is the truth, and the order completes."""
    done = _drill(
        "run", "--definition", "examples/order_fulfillment.json",
        "--pin", "fraud_check:before_commit:sever_after_commit",
        "--pin", "inventory_check:after_attempt_start:sever_after_commit", "--for-each-pin",
        "--dsn", pg_dsn, "--schema", "no_runs_here", "--artifacts", str(tmp_path),
    )  # fmt: skip
    assert done.stdout.strip().endswith("drills: 2 passed, 0 failed"), done.stdout[-3000:]


def test_flags_a_plan_file_would_ignore_are_refused() -> None:
    plan = str(PLANS / "order_fulfillment.charge-in-doubt.json")
    done = _drill("run", "--plan", plan, "--pin", "charge:after_handler:restart_database")
    assert done.returncode == 2
    assert "--pin, --app and --input go with --definition" in done.stderr
    assert "drills:" not in done.stdout, "nothing ran"


def test_a_typo_in_a_pins_field_is_refused_not_run_as_its_default(
    pg_dsn: str, tmp_path: Path
) -> None:
    """``"hitt": 2`` ran the pin at hit 1 and passed: the plan said one thing and the
    drill did another. A pin object's fields are checked like the plan's and a stub's."""
    plan = json.loads((PLANS / "order_fulfillment.charge-in-doubt.json").read_text())
    plan["definition_file"] = str(ROOT / "examples" / "order_fulfillment.json")
    plan["pins"] = [{"step": "charge", "boundary": "after_handler", "fault": "kill", "hitt": 2}]
    (tmp_path / "typo.json").write_text(json.dumps(plan))
    done = _drill("run", "--plan", str(tmp_path / "typo.json"), "--dsn", pg_dsn)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[1:] == [
        "  pins[0].hitt: not a pin field; allowed: boundary, fault, hit, step"
    ]
    assert "drills:" not in done.stdout, "nothing ran"


@pytest.mark.timeout(120)
def test_artifacts_given_relative_to_where_the_drill_is_run(pg_dsn: str, tmp_path: Path) -> None:
    """``--artifacts drills`` as a CI job writes it: the drill's workers run in the
    project's directory, so the stub file and boundary report under a relative path
    were looked for there, and every drill failed (a worker that could not load its
    stubs, or a timeout)."""
    done = drill(
        "run", "--definition", str(ROOT / "examples" / "order_fulfillment.json"),
        "--pin", "charge:after_handler:kill", "--dsn", pg_dsn, "--schema", "no_runs_here",
        "--artifacts", "drills", timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.strip().endswith("drills: 1 passed, 0 failed")
    assert list((tmp_path / "drills").glob("*/*/plan.json")), "the artifacts are where asked"


@pytest.mark.parametrize(
    "flags",
    [("--drill", "D1"), ("--workload", "flow"), ("--hit", "2"), ("--profile", "deep")],
    ids=lambda f: f[0],
)
def test_flags_of_the_harness_drills_are_refused_beside_a_plan(
    flags: tuple[str, str], pg_dsn: str
) -> None:
    """``--plan P --drill D1`` ran the plan alone, and passed, as if D1 had run too
    (``--profile deep`` ran it under the ci profile, which its scorecard named)."""
    plan = str(PLANS / "order_fulfillment.charge-in-doubt.json")
    done = _drill("run", "--plan", plan, *flags, "--dsn", pg_dsn)
    assert (done.returncode, done.stderr) == (
        2,
        "wayline drill run: --drill, --workload, --hit and --profile choose the harness's "
        "own drills, not a plan's (a plan runs its own pins, under the ci profile): run them "
        "apart\n",
    )
    assert "drills:" not in done.stdout, "nothing ran"


@pytest.mark.timeout(120)
def test_json_logs_make_every_stderr_line_json(pg_dsn: str, tmp_path: Path) -> None:
    """``--log-format json`` is one JSON object per line: the progress line of each
    finished drill was plain text among the JSON records."""
    done = _drill(
        "run", "--definition", "examples/order_fulfillment.json",
        "--pin", "charge:after_handler:kill", "--log-format", "json", "--dsn", pg_dsn,
        "--schema", "no_runs_here", "--artifacts", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = [json.loads(line) for line in done.stderr.splitlines()]
    assert any(r["message"].startswith("[1/1] P-order.fulfillment@1-") for r in records)


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--definition", "order.fulfillment@1", "--pin", "charge:after_handler:kill"],
        ["plan", "generate", "order.fulfillment@1"],
    ],
    ids=["run", "generate"],
)
def test_a_definition_in_a_schema_without_wayline_is_a_plan_that_cannot_run(
    command: list[str], pg_dsn: str
) -> None:
    """Exit 2, as for a version not published there: it was exit 1, which ``drill run``
    gives a plan that ran and broke an invariant."""
    done = _drill(*command, "--dsn", pg_dsn, "--schema", "no_wayline_here")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[1:] == [
        "  definition: order.fulfillment@1 cannot be read: schema no_wayline_here holds no "
        "Wayline tables: run `wayline migrate`, or give --schema the schema your instances are in"
    ]


def test_an_unsupported_pin_is_refused_saying_what_is_allowed() -> None:
    done = _drill(
        "run", "--definition", "examples/order_fulfillment.json",
        "--pin", "checks:after_handler:kill", "--pin", "shipped:before_commit:kill",
        "--pin", "shipped:before_signal_ack:restart_database",
    )  # fmt: skip
    assert done.returncode == 2
    assert "pins[0] checks:after_handler:kill: a parallel step has no work" in done.stderr
    assert "a signal step does not reach before_commit; it reaches before_signal_ack" in (
        done.stderr
    )
    assert (
        "pins[2] shipped:before_signal_ack:restart_database: restart_database holds a worker "
        "at its boundary while the server restarts; at before_signal_ack"
    ) in done.stderr


PARTIAL_APP = """
from engine import ActivityRegistry

app = ActivityRegistry()
app.register("inventory.reserve", lambda request: {"reserved": True})
"""
"""A team's app that handles one of the order example's targets only."""


@pytest.mark.parametrize(
    ("app", "refusal"),
    [
        (
            "teamapp:app",
            "app: teamapp:app has no handler for inventory.release (reserve's compensation), "
            "payments.charge (step charge), payments.refund (charge's compensation)",
        ),
        ("nowhere:app", "app: cannot load nowhere:app: no module nowhere in the working"),
    ],
)
def test_an_app_that_cannot_run_the_steps_is_refused_before_any_drill(
    app: str, refusal: str, tmp_path: Path
) -> None:
    """Not a worker that exits or a drill that times out waiting for work nobody claims."""
    (tmp_path / "teamapp.py").write_text(PARTIAL_APP)
    done = drill(
        "run", "--definition", str(ROOT / "examples/order_fulfillment.json"),
        "--pin", "charge:after_handler:kill", "--app", app, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert refusal in done.stderr
    assert "drills:" not in done.stdout, "nothing ran"


@pytest.mark.timeout(180)
def test_a_restart_pin_crashes_the_private_cluster_where_its_step_is(tmp_path: Path) -> None:
    """Without --dsn the drill owns its cluster: the server is stopped -m immediate while
    the pinned step's worker waits at the boundary, started again, and the invariants
    are checked after recovery. charge's outcome was never written: it is in doubt, as
    its definition says; reserve's uncommitted outcome is redone and the order ends."""
    card = tmp_path / "card.json"
    done = _drill(
        "run", "--definition", "examples/order_fulfillment.json",
        "--pin", "charge:after_handler:restart_database",
        "--pin", "reserve:before_commit:restart_database", "--for-each-pin",
        "--json", str(card), "--artifacts", str(tmp_path),
    )  # fmt: skip
    assert done.stdout.strip().endswith("drills: 2 passed, 0 failed"), done.stdout + done.stderr
    assert "target=owned cluster" in done.stdout
    assert done.stdout.count("  server  restarted 1 time, down ") == 2
    charge, reserve = (d["extra"]["plan"] for d in json.loads(card.read_text())["drills"])
    for plan in (charge, reserve):
        assert [p["fired"] for p in plan["pins"]] == [True]
        assert len(plan["server_down_seconds"]) == 1 and plan["recovery_seconds"] is not None
    assert "charge: UNKNOWN (in doubt), waiting for an operator" in charge["state"]
    assert {"instance: COMPLETED", "reserve: SUCCEEDED"} <= set(reserve["state"])
    assert all(e["effects"] == 1 for e in charge["effects"] + reserve["effects"])


@pytest.mark.timeout(180)
def test_a_restart_pin_hits_a_machines_advance_and_a_code_first_step_call(
    tmp_path: Path,
) -> None:
    saga = json.loads((PLANS / "order_saga.charge-in-doubt.json").read_text())
    plan = tmp_path / "saga.json"
    plan.write_text(json.dumps({**saga, "pins": ["charge.1:after_handler:restart_database"]}))
    machine = _drill(
        "run", "--definition", "examples/document_approval.json", "--input", '"v1"',
        "--pin", "InReview:before_commit:restart_database", "--artifacts", str(tmp_path),
    )  # fmt: skip
    code = _drill("run", "--plan", str(plan), "--artifacts", str(tmp_path))
    for done, state in (
        (machine, "Approved: CURRENT STATE after 2 transitions"),
        (code, "charge.1: UNKNOWN (in doubt), waiting for an operator"),
    ):
        assert done.stdout.strip().endswith("drills: 1 passed, 0 failed"), done.stdout[-3000:]
        assert ":restart_database: fired" in done.stdout
        assert "  server  restarted 1 time, down " in done.stdout
        assert f"  state  {state}" in done.stdout


def test_a_restart_pin_is_refused_on_a_server_it_was_given(pg_dsn: str, tmp_path: Path) -> None:
    done = _drill(
        "run", "--definition", "examples/order_fulfillment.json",
        "--pin", "charge:after_handler:restart_database", "--pin", "charge:after_handler:kill",
        "--for-each-pin", "--dsn", pg_dsn, "--artifacts", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        "pins charge:after_handler:restart_database: restart_database crashes and restarts "
        "the PostgreSQL server, which a drill does only to a private cluster it started "
        "itself, never to a server it was given (--dsn names a server given to it): run the "
        "plan without --dsn, and a private cluster is started for it"
    ) in done.stderr
    assert "drills:" not in done.stdout


def test_the_full_matrix_plan_is_written_and_reads_back(tmp_path: Path) -> None:
    out, definition = tmp_path / "full.json", ROOT / "examples/order_fulfillment.json"
    done = _drill("plan", "generate", str(definition), "--out", str(out))
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    labels = {f"{p['step']}:{p['boundary']}:{p['fault']}" for p in document["pins"]}
    assert "charge:after_handler:kill" in labels
    assert "shipped:before_signal_ack:duplicate_signal" in labels
    assert not any(label.startswith(("checks:", "delivery:")) for label in labels)
    assert (out.parent / document["definition_file"]).resolve() == definition


@pytest.mark.timeout(180)
def test_a_plan_catches_a_broken_engine_build(pg_dsn: str, tmp_path: Path) -> None:
    """The self-test's plan part: the example plan passes on the real engine, and fails
    when unknown outcomes are recorded as failures (charged again under a new key)."""

    async def run() -> tuple[list[str], object]:
        async with target_for(pg_dsn) as target:
            return await plan_self_test(target, 1, tmp_path, PLAN_DRILL)

    control, verdict = asyncio.run(run())
    assert control == []
    assert verdict.caught, verdict.evidence
    assert "charge" in verdict.evidence


@pytest.mark.timeout(180)
def test_a_machine_plan_catches_advances_that_write_outside_their_transition(
    pg_dsn: str, tmp_path: Path
) -> None:
    """The self-test's machine plan: it passes on the real engine, and M1 finds the
    review's write committed without its state when advances write on their own."""

    async def run() -> tuple[list[str], object]:
        async with target_for(pg_dsn) as target:
            return await plan_self_test(
                target, 1, tmp_path, MACHINE_PLAN_DRILL, MACHINE_PLAN_MUTANT
            )

    control, verdict = asyncio.run(run())
    assert control == []
    assert verdict.caught, verdict.evidence
    assert "M1" in verdict.evidence


def _with_order_handlers(
    pin: str, dsn: str, tmp_path: Path, start: str = '{"amount": 3}'
) -> tuple[dict, list[dict], subprocess.CompletedProcess[str]]:
    """One drill of the order example with its real handlers (``--app``), ``pin`` and
    the input ``start``: its scorecard entry, the effects its handlers wrote to their
    own file, the run."""
    effects, card = tmp_path / "effects.jsonl", tmp_path / "card.json"
    done = _drill(
        "run", "--definition", "examples/order_fulfillment.json",
        "--pin", pin, "--app", "examples.orders:app",
        "--input", start, "--dsn", dsn, "--schema", "no_runs_here",
        "--json", str(card), "--artifacts", str(tmp_path),
        env={"WAYLINE_EFFECTS_FILE": str(effects)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = json.loads(card.read_text())["drills"]
    return result, [json.loads(line) for line in effects.read_text().splitlines()], done


@pytest.mark.timeout(120)
def test_the_teams_own_handlers_run_instead_of_stubs(pg_dsn: str, tmp_path: Path) -> None:
    """``--app``: the example's real handlers write their effects to their own file too."""
    result, effects, _ = _with_order_handlers("charge:after_handler:exit", pg_dsn, tmp_path)
    assert "charge: UNKNOWN (in doubt), waiting for an operator" in result["extra"]["plan"]["state"]
    assert [e["target"] for e in effects] == ["inventory.reserve", "payments.charge"]


@pytest.mark.timeout(120)
def test_a_teams_handler_called_twice_under_one_key_is_a_note_not_a_counted_effect(
    pg_dsn: str, tmp_path: Path
) -> None:
    """The example's fraud.check appends a line on every call, whatever its key: the
    drill cannot see that file, so it says the handler ran twice under the key, never
    that the effect happened once, and fails nothing (an idempotent one would be fine)."""
    result, effects, done = _with_order_handlers("fraud_check:after_handler:kill", pg_dsn, tmp_path)
    keys = [e["key"] for e in effects if e["target"] == "fraud.check"]
    assert keys == ["plan-1/fraud_check/1"] * 2
    plan = result["extra"]["plan"]
    (fraud,) = [e for e in plan["effects"] if e["step"] == "fraud_check"]
    assert (fraud["calls"], fraud["effects"]) == (2, None)
    assert "key plan-1/fraud_check/1: 2 calls of your handler (its effects are in your system)" in (
        done.stdout
    )
    # inventory_check, its parallel branch, may have been entered in the killed worker
    # too: then it was called twice as well, and noted so.
    (note,) = [n for n in plan["notes"] if n["step"] == "fraud_check"]
    assert (
        "your handler ran 2 times under one idempotency key (plan-1/fraud_check/1)"
        in (note["text"])
    )
    assert f"  note  {note['text']}" in done.stdout
    assert result["failures"] == []
    # The scorecard does not make up how many of those calls applied an effect either.
    (line,) = [line for line in done.stdout.splitlines() if "effects called" in line]
    assert "applied: not seen (your handlers)" in line


@pytest.mark.timeout(120)
def test_a_teams_handler_that_raised_is_counted_as_the_call_it_was(
    pg_dsn: str, tmp_path: Path
) -> None:
    """The example's charge fails its first attempt before any effect (the input
    scripts it), then succeeds under the next key: both calls ran the handler, and
    the drill says so per key, not only the call that returned."""
    start = '{"amount": 3, "fail": {"payments.charge": 1}}'
    pin = "fraud_check:after_handler:kill"
    result, _, done = _with_order_handlers(pin, pg_dsn, tmp_path, start)
    plan = result["extra"]["plan"]
    assert "charge: SUCCEEDED after 2 attempts" in plan["state"]
    charges = [(e["key"], e["calls"]) for e in plan["effects"] if e["step"] == "charge"]
    assert charges == [("plan-1/charge/1", 1), ("plan-1/charge/2", 1)]
    assert "key plan-1/charge/1: 1 call of your handler (its effects are in your system)" in (
        done.stdout
    )


TEAM_APP = """
import os
import sys

from engine import ActivityRegistry

if os.environ.get("WAYLINE_DRILL_PLAN_STUBS") and os.environ.get("TEAM_APP_BROKEN"):
    sys.exit(3)  # a worker that cannot start: the app fails where the drill runs it

app = ActivityRegistry()


@app.workflow("team-flow", version="1")
async def team_flow(ctx, order):
    return await ctx.step("charge", lambda: {"charged": order["amount"]})
"""
"""A team's code-first app in a module of its own directory, not the project's."""


def _team_drill(tmp_path: Path, dsn: str, env: dict[str, str] | None = None) -> tuple[dict, str]:
    """``drill run`` of ``TEAM_APP`` from its own directory: the drill and the output."""
    drills, output = _team_app_drill(
        tmp_path, dsn, TEAM_APP, "team-flow@1", ["charge.1:after_handler:exit"], env
    )
    (result,) = drills
    return result, output


def _team_app_drill(
    tmp_path: Path,
    dsn: str,
    source: str,
    definition: str,
    pins: list[str],
    env: dict[str, str] | None = None,
) -> tuple[list[dict], str]:
    """``drill run`` of the app ``source`` (module ``teamapp``) from its own directory,
    one drill per pin: the drills and the output."""
    home, card = tmp_path / "team", tmp_path / "card.json"
    home.mkdir()
    (home / "teamapp.py").write_text(source)
    done = drill(
        "run", "--definition", definition, *(f"--pin={pin}" for pin in pins), "--for-each-pin",
        "--app", "teamapp:app", "--input", '{"amount": 3}', "--dsn", dsn,
        "--schema", "no_runs_here", "--json", str(card), "--artifacts", str(tmp_path),
        timeout=120, cwd=home, env=env,
    )  # fmt: skip
    assert card.exists(), done.stdout + done.stderr
    return json.loads(card.read_text())["drills"], done.stdout + done.stderr


POST_APP = """
from engine import ActivityRegistry

app = ActivityRegistry()


@app.workflow("post-flow", version="1")
async def post_flow(ctx, order):
    return await ctx.step(
        "post", lambda: {"posted": order["amount"]}, retries=2, on_unknown="retry_same_key"
    )
"""
"""A team's code-first step that a worker's death retries with its step_id."""


@pytest.mark.timeout(180)
def test_a_code_step_body_entered_twice_under_one_step_id_is_a_note(
    pg_dsn: str, tmp_path: Path
) -> None:
    """Killed after its body ran, ``post`` is retried under the same step_id: its body
    ran twice, which the drill says (a note: the effects are in the team's system).
    Killed after its attempt started, before the body ran, it is retried the same way,
    but its body ran once: nothing to say, though it took two attempts too."""
    pins = ["post.1:after_handler:kill", "post.1:after_attempt_start:kill"]
    drills, output = _team_app_drill(tmp_path, pg_dsn, POST_APP, "post-flow@1", pins)
    after_body, before_body = (d["extra"]["plan"] for d in drills)
    for plan in (after_body, before_body):
        assert "post.1: SUCCEEDED after 2 attempts" in plan["state"], output
    (twice,) = after_body["effects"]
    assert (twice["step"], twice["calls"], twice["effects"]) == ("post.1", 2, None)
    (note,) = after_body["notes"]
    ran = f"post.1: your step body ran 2 times under one step_id ({twice['key']})"
    assert note["text"].startswith(ran), note
    assert f"  note  {note['text']}" in output
    line = f"key {twice['key']}: 2 calls of your step body (its effects are in your system)"
    assert line in output
    assert [(e["key"], e["calls"]) for e in before_body["effects"]] == [(twice["key"], 1)]
    assert before_body["notes"] == []
    assert [d["verdict"] for d in drills] == ["passed", "passed"], output
    # The scorecard counts the bodies entered (the code calls no handler), not "0 effects".
    (line,) = [line for line in output.splitlines() if "effects called" in line]
    assert (
        "effects called 0 (+ your code's step bodies entered 3) applied: not seen (your code)"
        in (line)
    )


@pytest.mark.timeout(120)
def test_a_teams_app_is_found_where_the_drill_is_run(pg_dsn: str, tmp_path: Path) -> None:
    """``--app teamapp:app`` names a module beside the user: the drill's worker
    processes import it from there, as the harness itself does."""
    result, output = _team_drill(tmp_path, pg_dsn)
    assert result["verdict"] == "passed", output
    assert (
        "charge.1: UNKNOWN (in doubt), waiting for an operator" in result["extra"]["plan"]["state"]
    )


def test_a_code_plan_naming_a_version_its_app_does_not_declare_says_what_it_declares(
    tmp_path: Path,
) -> None:
    """Not only "give --dsn": the app was named, and a misspelt version is the mistake."""
    (tmp_path / "teamapp.py").write_text(TEAM_APP)
    done = drill(
        "run", "--definition", "team-flow@2", "--pin", "charge.1:after_handler:exit",
        "--app", "teamapp:app", timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        "nor does teamapp:app declare it as a code workflow (it declares team-flow@1)"
    ) in done.stderr


@pytest.mark.timeout(120)
def test_a_worker_that_cannot_start_fails_the_drill_saying_so(pg_dsn: str, tmp_path: Path) -> None:
    """A worker that exits before any pin fired fails the drill at once, naming its
    log, instead of being started again until the drill times out."""
    result, output = _team_drill(tmp_path, pg_dsn, env={"TEAM_APP_BROKEN": "1"})
    assert result["verdict"] == "failed", output
    assert "exited with status 3 before any pin fired" in json.dumps(result), output
    assert result["failures"][0].startswith("worker "), "no exception type before it"


@pytest.mark.timeout(120)
def test_a_machines_pins_from_the_command_line_hit_the_advance_of_their_state(
    pg_dsn: str, tmp_path: Path
) -> None:
    card = tmp_path / "card.json"
    done = _drill(
        "run", "--definition", "examples/document_approval.json", "--input", '"v1"',
        "--pin", "InReview:before_commit:exit",
        "--pin", "Submitted:after_claim:sever_before_commit", "--for-each-pin",
        "--dsn", pg_dsn, "--schema", "no_runs_here", "--json", str(card),
        "--artifacts", str(tmp_path),
    )  # fmt: skip
    assert done.stdout.strip().endswith("drills: 2 passed, 0 failed"), done.stdout + done.stderr
    for result in json.loads(card.read_text())["drills"]:
        plan = result["extra"]["plan"]
        assert [pin["fired"] for pin in plan["pins"]] == [True]
        assert plan["state"] == [
            "instance: COMPLETED",
            "Approved: CURRENT STATE after 2 transitions",
        ]
        assert [(e["step"], e["key"], e["effects"]) for e in plan["effects"]] == [
            ("Submitted", "transition 1", 1),
            ("InReview", "transition 2", 1),
        ]
        assert "M1" in result["invariants"]


@pytest.mark.parametrize(
    ("source", "pins", "problems"),
    [
        pytest.param(
            ("--definition", "examples/document_approval.json", "--input", '"v1"'),
            ("Approved:before_commit:kill", "InReview:after_handler:kill"),
            (
                "pins[0] Approved:before_commit:kill: 'Approved' is a terminal state",
                "pins[1] InReview:after_handler:kill: a machine's advance does not reach "
                "after_handler; it reaches after_claim, before_commit, after_commit, "
                "in_lease_renewal",
            ),
            id="machine",
        ),
        pytest.param(
            ("--definition", "order-saga@1", "--app", "examples.order_saga:app"),
            ("charge:after_handler:kill", "charge.1:after_claim:kill"),
            (
                "pins[0] charge:after_handler:kill: no step call or signal 'charge'",
                "pins[1] charge.1:after_claim:kill: a step call does not reach after_claim; it "
                "reaches after_attempt_start, after_handler, before_commit, after_commit",
            ),
            id="code-first",
        ),
    ],
)
def test_a_pin_that_cannot_run_is_refused_saying_what_is_allowed(
    source: tuple[str, ...], pins: tuple[str, ...], problems: tuple[str, ...]
) -> None:
    done = _drill("run", *source, *(a for pin in pins for a in ("--pin", pin)))
    assert done.returncode == 2
    for problem in problems:
        assert problem in done.stderr


def test_the_full_matrix_of_a_machine_is_written_and_reads_back(tmp_path: Path) -> None:
    out = tmp_path / "full.json"
    done = _drill(
        "plan", "generate", str(ROOT / "examples/document_approval.json"), "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    labels = {f"{p['step']}:{p['boundary']}:{p['fault']}" for p in document["pins"]}
    assert {"Submitted:after_claim:kill", "InReview:before_commit:sever_after_commit"} <= labels
    assert not any(label.startswith(("Approved:", "Rejected:", "Expired:")) for label in labels)
    assert document["input"] == ""


def test_the_full_matrix_of_a_code_first_workflow_is_written_from_its_app(
    tmp_path: Path,
) -> None:
    out = tmp_path / "full.json"
    done = _drill(
        "plan", "generate", "order-saga@1", "--app", "examples.order_saga:app", "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    assert document["app"] == "examples.order_saga:app"
    labels = {f"{p['step']}:{p['boundary']}:{p['fault']}" for p in document["pins"]}
    assert {"charge.1:after_handler:kill", "paid:before_signal_ack:duplicate_signal"} <= labels


def _private_mounts() -> bool:
    """Whether this process may make a mount namespace of its own (root, ``unshare``,
    and a kernel or container that allows it), where the server binaries can be hidden."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not PG_ROOT.is_dir():
        return False
    probe = ["unshare", "-m", "--propagation", "private", "true"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


@pytest.mark.skipif(
    not _private_mounts(),
    reason="needs a private mount namespace (root and `unshare -m`) to hide the server binaries",
)
def test_no_server_binaries_for_a_private_cluster_is_one_line(tmp_path: Path) -> None:
    """Without --dsn the drills start a private cluster; on a machine without PostgreSQL's
    binaries (hidden here by an empty directory mounted over them, in this process's
    mount namespace only) that was a traceback of EmbeddedPostgresError."""
    empty = tmp_path / "no-postgresql"
    empty.mkdir()
    command = (
        f"mount --bind {empty} {PG_ROOT} && exec {sys.executable} -m engine.cli.main "
        f"drill run --definition {ROOT}/examples/order_fulfillment.json "
        "--pin charge:after_handler:kill"
    )
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", command],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines() == [
        f"wayline drill run: no PostgreSQL server binaries (postgres, initdb, pg_ctl) under "
        f"{PG_ROOT}/<version>/bin: install the Debian package `postgresql` (apt-get "
        "install postgresql); or give --dsn a PostgreSQL to drill on"
    ]
