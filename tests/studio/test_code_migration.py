"""Code runs are migrated from the command line: the studio does not load a team's
code, so it cannot replay a run's journal against a new version. It offered a code run
a tick on the version's page anyway, then refused it in the preview as "not loaded
here", saying nowhere how such a run is migrated. Now the version's page offers no
tick for a code run but its command, every refusal says how code runs are migrated
(the API's too), the previews give each refused run its command, and that command,
run as shown (with the app's name and a reason filled in), migrates the run."""

from __future__ import annotations

import html
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from engine.api.client import Client
from studio.instances.code_migration import HOW
from studio.roles import Role
from tests.studio import code_migration_app
from tests.studio.live import LiveStudio, SignedInClient

ROOT = Path(__file__).resolve().parents[2]
VERSION_PAGE = "/definitions/moving/versions/2"
COMMAND = re.compile(r'<code class="command">([^<]+)</code>')


@pytest.fixture(scope="module")
def operator_name(studio: LiveStudio, team: str) -> str:
    return studio.user(team, Role.OPERATOR)


@pytest.fixture(scope="module")
def operator(studio: LiveStudio, operator_name: str) -> SignedInClient:
    return studio.client(operator_name)


@pytest.fixture(scope="module")
def runs(studio: LiveStudio, team: str, operator: SignedInClient) -> list[str]:
    """Two runs of moving@1 started from the studio, then moving@2 published with its
    code (so the report judged them compatible) and the edge 1 -> 2 declared."""
    first, second = code_migration_app.app.workflows
    studio.run(lambda store: Client(store).publish(first.definition, "seed", team, code=first))
    started = []
    for run in ("r-1", "r-2"):
        body = {"definition": "moving", "version": "1", "instance_id": run}
        answer = operator.post("/api/instances", json=body, headers={"X-CSRF-Token": operator.csrf})
        assert answer.status_code == 201, answer.text
        started.append(answer.json()["id"])
    studio.run(lambda store: Client(store).publish(second.definition, "seed", team, code=second))
    studio.declare_migration("moving", "the new code replays the old journals")
    return started


def expected(run: str, studio: LiveStudio, team: str, actor: str) -> str:
    return (
        f"wayline instance migrate {run} --to 2 --app tests.studio.code_migration_app:APP "
        f"--team {team} --schema {studio.schema} --actor {actor} --reason REASON"
    )


def commands(page: str) -> list[str]:
    return [html.unescape(c) for c in COMMAND.findall(page)]


def test_previews_refuse_a_code_run_saying_how_and_giving_its_command(
    studio: LiveStudio, team: str, operator_name: str, operator: SignedInClient, runs: list[str]
) -> None:
    run = runs[1]
    wanted = expected(run, studio, team, operator_name)
    listed = operator.get(
        "/instances/bulk",
        params={"action": "migrate", "select": "hand", "pick": run, "to_version": "2"},
    )
    assert listed.status_code == 200, listed.text
    row = re.search(rf'<tr data-instance="{re.escape(run)}".*?</tr>', listed.text, re.S)
    assert row and "refused" in row.group(0) and HOW in html.unescape(row.group(0)), listed.text
    assert commands(row.group(0)) == [wanted]
    grouped = re.search(r'id="bulk-refusals".*?</ul>', listed.text, re.S)
    assert grouped and HOW in html.unescape(grouped.group(0))

    previewed = operator.form(f"{VERSION_PAGE}/migrate/preview", {"instance": run})
    assert previewed.status_code == 200, previewed.text
    assert commands(previewed.text) == [wanted]

    api = operator.post(
        "/api/instances/bulk/preview",
        json={"action": "migrate", "version": "2", "instances": [run]},
        headers={"X-CSRF-Token": operator.csrf},
    )
    assert api.status_code == 200, api.text
    [judged] = api.json()["instances"]
    assert judged["verdict"] == "refused" and judged["reason"].endswith(HOW), judged


def test_the_version_page_gives_a_code_run_its_command_which_migrates_it(
    studio: LiveStudio,
    team: str,
    operator_name: str,
    operator: SignedInClient,
    runs: list[str],
    pg_dsn: str,
) -> None:
    page = operator.get(VERSION_PAGE).text
    assert 'name="instance"' not in page and "Preview migration" not in page, "no tick offered"
    assert "a code run is migrated from the command line" in page
    assert commands(page) == [expected(run, studio, team, operator_name) for run in runs]

    words = shlex.split(commands(page)[0])
    words[words.index("--app") + 1] = "tests.studio.code_migration_app:app"
    words[words.index("--reason") + 1] = "the new code replays it"
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli.main", *words[1:]],
        cwd=ROOT,
        env={**os.environ, "WAYLINE_DSN": pg_dsn},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"done {runs[0]}: migrated from moving@1 to moving@2" in done.stdout
    shown = operator.get(f"/api/instances/{runs[0].replace('/', '~')}").json()
    assert shown["definition"]["version"] == "2"
