"""The shape of the imports, read from the source (issue 18): imports only run downward.

Every ``.py`` under the project's packages is parsed (never imported) and every import
statement in it counts, wherever it stands: at the top, inside a function, under
``if TYPE_CHECKING``. An import moved into a function still makes its module depend on
the other, so hiding a cycle there does not remove it.

- No module of ``engine`` imports ``studio`` or ``verification``: the engine is below
  both, and their ``wayline`` subcommands register themselves through the
  ``wayline.commands`` entry points.
- Nothing imports the command line except the command line: the command line is the
  ``engine.cli`` package, plus the subcommand modules the entry points name; what they
  share with the rest is in ordinary engine modules.
- No module of ``studio`` imports ``engine.store``: the studio reads through
  ``engine.Queries`` and writes through ``engine.Client``, and takes the few store
  names it needs (``Store``, the setup, the errors) from ``engine`` itself.
- The studio's JSON API never imports its HTML layer, not even through another module:
  an API route module (``api.py``, ``*_api.py``) reaches neither ``studio.rendering``
  nor a module of pages (``pages.py``, ``*_pages.py``); the runtime and the principal
  reach both through Litestar's dependency injection (``studio.dependencies``).
- No import cycle between modules.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

from engine.modes.machines.graph import reachable

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "studio", "verification", "bench", "examples")
"""The folders scanned: the three packages, the benchmarks and the examples a user
copies from."""
ENGINE_MUST_NOT_IMPORT = ("studio", "verification")
COMMAND_GROUP = "wayline.commands"


def module_name(path: Path) -> str:
    """``engine/store/leases.py`` is ``engine.store.leases``; a package is its ``__init__``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_modules() -> dict[str, Path]:
    """Every module of the scanned folders by its dotted name; hidden folders (the
    benchmark's DBOS virtualenv in ``bench/.venv-dbos``) are not the project's."""
    return {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if not any(part.startswith(".") for part in path.relative_to(ROOT).parts)
    }


def imported_names(module: str, path: Path) -> Iterator[str]:
    """The dotted names every import statement of the file names, anywhere in it.

    ``from a import b`` yields ``a.b``: the module ``a.b`` when there is one, else the
    name ``b`` in ``a`` (``resolve`` finds which); relative imports are made absolute.
    Importing ``a.b`` also runs ``a/__init__.py``, but the package is not counted as
    imported for that, as import-linting tools do, or every package that re-exports
    its modules' names would form a cycle with them.
    """
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                drop = node.level - 1 if is_package else node.level
                anchor = anchor[: len(anchor) - drop]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield base if alias.name == "*" else f"{base}.{alias.name}"


def resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The scanned module a dotted name lives in: itself, or its nearest parent."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Every module's raw imported names, and its edges to other scanned modules."""
    modules = source_modules()
    raw: dict[str, set[str]] = {}
    edges: dict[str, set[str]] = {}
    for module, path in modules.items():
        raw[module] = set(imported_names(module, path))
        targets = {resolve(name, modules) for name in raw[module]}
        edges[module] = {t for t in targets if t is not None and t != module}
    return raw, edges


def command_line_modules(modules: set[str]) -> set[str]:
    """The ``engine.cli`` package, and every module that registers a ``wayline``
    subcommand through the entry points."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    plugins = project.get("entry-points", {}).get(COMMAND_GROUP, {})
    registered = {value.split(":")[0].strip() for value in plugins.values()}
    return {
        m for m in modules if m == "engine.cli" or m.startswith("engine.cli.") or m in registered
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_scan_reads_every_package() -> None:
    """Guard the scan itself: it finds the modules and the edges it is about."""
    raw, edges = import_graph()
    assert {
        "engine.cli.main",
        "engine.store.leases",
        "studio.app",
        "verification.runner",
    } <= raw.keys()
    assert "engine.store.store" in edges["engine.worker.loop"]


def imports_from(package: str, forbidden: Callable[[str], bool]) -> list[str]:
    """Every import of a module of ``package`` whose imported name is ``forbidden``."""
    raw, _ = import_graph()
    return sorted(
        f"{module} imports {name}"
        for module, names in raw.items()
        if module.split(".")[0] == package
        for name in names
        if forbidden(name)
    )


def test_no_engine_module_imports_the_studio_or_the_harness() -> None:
    upward = imports_from("engine", lambda name: name.split(".")[0] in ENGINE_MUST_NOT_IMPORT)
    assert not upward, "the engine imports upward:\n" + "\n".join(upward)


def test_no_studio_module_imports_the_store() -> None:
    reaching_in = imports_from(
        "studio", lambda name: name == "engine.store" or name.startswith("engine.store.")
    )
    assert not reaching_in, "the studio reaches into the store:\n" + "\n".join(reaching_in)


def is_studio_html(module: str) -> bool:
    return module == "studio.rendering" or (
        module.startswith("studio.") and module.rpartition(".")[2].endswith("pages")
    )


def is_studio_api(module: str) -> bool:
    return module.startswith("studio.") and module.rpartition(".")[2].endswith("api")


def test_the_studio_api_never_imports_the_html_layer() -> None:
    _, edges = import_graph()
    api = sorted(m for m in edges if is_studio_api(m))
    assert "studio.instances.api" in api and is_studio_html("studio.instances.pages")
    reaching = sorted(
        f"{module} reaches {target}"
        for module in api
        for target in reachable(module, edges)
        if is_studio_html(target)
    )
    assert not reaching, "the API imports the HTML layer:\n" + "\n".join(reaching)


def test_nothing_but_the_command_line_imports_the_command_line() -> None:
    _, edges = import_graph()
    command_line = command_line_modules(set(edges))
    assert "engine.cli.main" in command_line
    reaching_in = sorted(
        f"{module} imports {target}"
        for module, targets in edges.items()
        if module not in command_line
        for target in targets & command_line
    )
    assert not reaching_in, "the command line imported from outside:\n" + "\n".join(reaching_in)


def test_no_import_cycles() -> None:
    _, edges = import_graph()
    found = cycles(edges)
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_cycle_finder_sees_a_cycle_through_three_modules() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c"]]
