"""``wayline definition publish --app MODULE:APP`` for code workflows, as a person at a
terminal sees it: published once, then already published; changed code under a
published version refused with both fingerprints; code that fails the lint not
published at all. The catalog reads what was published back to the same definition."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.model.definitions import Mode
from engine.store import catalog
from tests.e2e.test_cli_e2e import ok, one_line
from tests.fixtures.journal import changed_saga, outlines

if TYPE_CHECKING:
    from tests.e2e.conftest import Harness

OUTLINES = "tests.fixtures.journal.outlines:app"
BAD_CLOCK = "tests.fixtures.journal.bad_clock:app"


def lines(verb: str) -> str:
    return "".join(f"{verb} {f.ref} {f.fingerprint}\n" for f in outlines.app.workflows)


async def test_publishing_an_app_is_idempotent_and_reads_back(e2e: Harness) -> None:
    assert await ok(e2e, "definition", "publish", "--app", OUTLINES) == lines("published")
    assert await ok(e2e, "definition", "publish", "--app", OUTLINES) == lines("already published")
    stored = {v.definition.ref: v.definition for v in await catalog.versions(e2e.store)}
    for flow in outlines.app.workflows:
        definition = stored[flow.ref]
        assert definition.mode is Mode.CODE
        assert definition.manifest.exchange()["outline"] == flow.outline
    listed = await ok(e2e, "definition", "list")
    assert f"order-saga@1 {outlines.order_saga_flow().fingerprint[:12]} code manifest" in listed


async def test_changed_code_under_a_published_version_is_refused(e2e: Harness) -> None:
    await ok(e2e, "definition", "publish", "--app", OUTLINES)
    published = outlines.order_saga_flow().fingerprint
    changed = changed_saga.app.workflows[0].fingerprint
    refused = await e2e.cli(
        "definition", "publish", "--app", "tests.fixtures.journal.changed_saga:app"
    )
    assert refused.code == 1
    assert one_line(refused) == (
        "wayline definition publish: order-saga@1 is published with fingerprint "
        f"{published[:12]}…, this code is {changed[:12]}…: publish a new version"
    )


async def test_code_that_fails_the_lint_is_not_published(e2e: Harness) -> None:
    refused = await e2e.cli(
        "definition", "publish", "--app", "tests.fixtures.journal.bad_clock:app"
    )
    assert refused.code == 1
    assert refused.stdout.splitlines() == [
        "bad-clock@1 line 9: time.time() is not available in workflow code; "
        "use ctx.now() or call it inside ctx.step"
    ]
    assert [v.definition.name for v in await catalog.versions(e2e.store)] == []
