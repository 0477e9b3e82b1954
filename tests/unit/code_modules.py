"""Declaring code workflows from source text in tests: each text in a file of its own,
imported as a module always named ``flows`` (the module is part of the fingerprint)."""

from __future__ import annotations

import importlib.util
import sys
from itertools import count
from pathlib import Path

from engine.modes.code.declaration import CodeWorkflow

HEADER = "from engine import ActivityRegistry\n\napp = ActivityRegistry()\n"
_files = count()


def declared(tmp_path: Path, source: str, header: str = HEADER) -> CodeWorkflow:
    """The first workflow ``source`` declares on ``app`` (which ``header`` makes)."""
    path = tmp_path / f"flows_{next(_files)}.py"
    path.write_text(header + source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("flows", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["flows"] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["flows"]
    return module.app.workflows[0]
