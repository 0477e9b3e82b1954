"""``wayline drill ...`` in a subprocess, exactly as a person or CI runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TEST_DSN_ENV = "WAYLINE_TEST_DSN"
CI_DRILL_SECONDS = 360.0
"""How long one drill family of the ``ci`` profile may run before the test gives up."""
OUTPUT_TAIL = 3000
"""How much of each output stream a failure shows."""


def drill(
    *args: str, timeout: float, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """Run ``wayline drill ARGS`` in ``cwd`` (the repository's root unless a test is a
    team's own directory; ``env`` adds variables)."""
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.main", "drill", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


def ci_drill(
    drill_id: str, directory: Path
) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """Run the drill family ``drill_id`` under the ``ci`` profile as a person does (on the
    test's PostgreSQL when ``WAYLINE_TEST_DSN`` names one, else a private cluster), its
    artifacts in ``directory``: its scorecard and the finished process. Fails with the
    output's tail when no scorecard was written."""
    card = directory / "scorecard.json"
    server = ("--dsn", os.environ[TEST_DSN_ENV]) if os.environ.get(TEST_DSN_ENV) else ()
    done = drill(
        "run", "--drill", drill_id, "--profile", "ci", "--json", str(card),
        "--artifacts", str(directory), *server, timeout=CI_DRILL_SECONDS,
    )  # fmt: skip
    assert card.exists(), done.stdout[-OUTPUT_TAIL:] + done.stderr[-OUTPUT_TAIL:]
    return json.loads(card.read_text()), done
