"""The drill harness and the benchmark change the engine only through the seams it
offers (its store's statement filter and hooks, its worker's hooks, its configuration),
never by patching it: no module of theirs calls ``setattr`` or ``delattr``, or assigns
to or deletes an attribute of anything imported from ``engine``."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("verification", "bench")


def _engine_names(tree: ast.AST) -> set[str]:
    """The names a module binds to engine modules, classes and functions (anywhere)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(
                alias.asname or alias.name.split(".")[0]
                for alias in node.names
                if alias.name.split(".")[0] == "engine"
            )
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "engine":
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _root(node: ast.expr) -> str:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign | ast.Delete):
        targets = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        targets = [node.target]
    else:
        return []
    flat = []
    while targets:
        target = targets.pop()
        if isinstance(target, ast.Tuple | ast.List):
            targets.extend(target.elts)
        else:
            flat.append(target)
    return flat


def patches(source: str) -> Iterator[int]:
    """Lines of ``source`` that patch: ``setattr``/``delattr``, or an attribute of an
    engine import assigned or deleted."""
    tree = ast.parse(source)
    engine = _engine_names(tree)
    for node in ast.walk(tree):
        called = node.func if isinstance(node, ast.Call) else None
        if isinstance(called, ast.Name) and called.id in ("setattr", "delattr"):
            yield node.lineno
        for target in _targets(node):
            if isinstance(target, ast.Attribute) and _root(target) in engine:
                yield node.lineno


def test_the_scan_finds_a_patch() -> None:
    source = (
        "from engine.store import work\n"
        "import engine.worker.processors as p\n"
        "def f():\n"
        "    from engine.store.fencing import LeaseFence\n"
        "    LeaseFence.recover = None\n"
        "work.HELD = ''\n"
        "p.StartOrSettle.__call__, x = None, 1\n"
        "setattr(work, 'HELD', '')\n"
        "lease = work.Lease\n"
        "lease_copy.token = 2\n"
    )
    assert sorted(patches(source)) == [5, 6, 7, 8]


def test_the_harness_and_the_benchmark_patch_nothing() -> None:
    """Hidden folders are not ours (the benchmark's DBOS virtual environment)."""
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in SCANNED
        for path in sorted((ROOT / folder).rglob("*.py"))
        if not any(part.startswith(".") for part in path.relative_to(ROOT).parts)
        for line in patches(path.read_text())
    ]
    assert found == []
