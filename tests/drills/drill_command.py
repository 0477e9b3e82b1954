"""``wayline drill ...`` in a subprocess, exactly as a person or CI runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def drill(
    *args: str, timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``wayline drill ARGS`` from the repository's root (``env`` adds variables)."""
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.main", "drill", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )
