"""A failed drill's reproduction line names the server its campaign ran on: without
``--dsn`` it started a private cluster instead, so the copied line ran somewhere else.
A password is never printed: the line names the server without it and says where libpq
reads it from, in a shell comment, so the line still runs as copied."""

from __future__ import annotations

from engine.store.migrations import DEFAULT_SCHEMA
from engine.worker.faults import Action, Boundary, Fault
from verification.drills.base import DrillResult
from verification.scorecard import PASSWORD_NOT_SHOWN, drill_entry, server_options

FAILED = DrillResult("D1-kill-after_commit-s0", "D1", "kill at after_commit", 7, "failed", 1.0)
LINE = "wayline drill run --drill D1-kill-after_commit-s0 --seed 0x2A --profile ci"


def _reproduce(dsn: str | None, schema: str = DEFAULT_SCHEMA) -> str:
    return drill_entry(FAILED, 42, "ci", server_options(dsn, schema))["reproduce"]


def test_a_drill_run_on_a_given_server_is_reproduced_there() -> None:
    dsn = "postgresql://ci@db.example:5432/drills"
    assert _reproduce(dsn) == f"{LINE} --dsn {dsn}"
    assert _reproduce(dsn, "runs") == f"{LINE} --dsn {dsn} --schema runs"


def test_a_password_is_left_out_and_said_to_come_from_the_environment() -> None:
    line = _reproduce("postgresql://ci:s3cret@db.example:5432/drills?sslmode=require")
    assert "s3cret" not in line
    dsn = "'user=ci dbname=drills host=db.example port=5432 sslmode=require'"
    assert line == f"{LINE} --dsn {dsn}{PASSWORD_NOT_SHOWN}"
    assert "s3cret" not in _reproduce("host=db user=ci password='s3cret x'")


def test_a_drill_run_on_a_private_cluster_is_reproduced_on_one() -> None:
    assert _reproduce(None) == LINE


def test_a_drill_plan_is_reproduced_on_its_server_too() -> None:
    plan = DrillResult("P-1", "P", "a plan", 7, "failed", 1.0)
    plan.record.extra["reproduce"] = "wayline drill run --plan /tmp/a/plan.json"
    where = server_options("postgresql://ci@db/drills", "runs")
    assert drill_entry(plan, 42, "ci", where)["reproduce"] == (
        "wayline drill run --plan /tmp/a/plan.json --dsn postgresql://ci@db/drills --schema runs"
    )


def test_a_fault_that_never_fired_is_reproduced_at_the_hit_it_was_planned_at() -> None:
    unfired = DrillResult("D1-kill-after_commit-s0", "D1", "kill at after_commit", 7, "failed", 1.0)
    unfired.record.plan.append(Fault(Boundary.AFTER_COMMIT, 3, Action.KILL))
    assert drill_entry(unfired, 42, "ci")["reproduce"] == f"{LINE} --hit 3"
