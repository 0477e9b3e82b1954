"""The static determinism lint of a code workflow (``wayline definition check --app``).

Workflow code is replayed after every park, crash and deploy and must take the same
path each time, so what differs between two runs of the same code (the clock,
randomness, fresh ids, the network, the store, asyncio's scheduling, a set's order)
belongs in a step body, whose result is recorded, or comes from ``ctx``. The lint
reads the function's source (never runs it) and names each such call with its line,
in the words the runtime guard uses (``bad-clock@1 line 9: time.time() is not
available in workflow code; use ctx.now() or call it inside ctx.step``).

It also names a step whose options cannot do what they say: ``on_unknown=
"retry_same_key"`` with fewer than two attempts (``retries``) never retries, so an
unknown outcome would wait for an operator after all.

Names are resolved through the module's imports (``from time import time as now``
still reads the clock). Nested functions and lambdas are step bodies or helpers and
are not searched. It is a best effort before publishing: the runtime guard and replay's
divergence check are what stop the rest.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from engine.modes.code.declaration import CodeWorkflow
from engine.modes.code.outline import COMPREHENSIONS, SKIPPED

CLOCK_ADVICE = "use ctx.now() or call it inside ctx.step"
RANDOM_ADVICE = "use ctx.random() or call it inside ctx.step"
UUID_ADVICE = "use ctx.uuid4() or call it inside ctx.step"
SLEEP_ADVICE = "use ctx.sleep()"
ASYNCIO_ADVICE = "use ctx.all or ctx.race"
EFFECT_TEXT = "not available in workflow code, perform effects inside ctx.step"
SET_ORDER_TEXT = (
    "iterating a set is not deterministic in workflow code (its order changes from one "
    "process to the next); iterate sorted(...) instead"
)
CALLS = {
    **dict.fromkeys(
        (
            "time.time",
            "time.time_ns",
            "time.monotonic",
            "time.monotonic_ns",
            "time.perf_counter",
            "time.perf_counter_ns",
            "datetime.datetime.now",
            "datetime.datetime.utcnow",
            "datetime.datetime.today",
            "datetime.date.today",
        ),
        CLOCK_ADVICE,
    ),
    **dict.fromkeys(("uuid.uuid1", "uuid.uuid4"), UUID_ADVICE),
    **dict.fromkeys(("os.urandom",), RANDOM_ADVICE),
    **dict.fromkeys(("time.sleep", "asyncio.sleep"), SLEEP_ADVICE),
}
"""Calls refused by their qualified name, with what to do instead."""
MODULES = {"random": RANDOM_ADVICE, "secrets": RANDOM_ADVICE, "asyncio": ASYNCIO_ADVICE}
"""Modules of which every call is refused, with what to do instead."""
EFFECTS = ("open", "socket", "psycopg", "urllib.request", "http.client", "requests", "httpx")
"""Calls (or modules of calls) that are effects: they belong in a step body."""
SAME_KEY_TEXT = (
    "ctx.step(on_unknown='retry_same_key') with retries={retries} never retries: the run "
    "under the same key is a second attempt, so an unknown outcome waits for an operator; "
    "give retries=2 or more"
)
SET_CALLS = frozenset({"set", "frozenset"})
SHORT_NAMES = {"datetime.datetime.": "datetime.", "datetime.date.": "date."}
"""How a class method is named in messages: as the code calls it."""


@dataclass(frozen=True)
class LintProblem:
    workflow: str
    """``name@version``."""
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.workflow} line {self.line}: {self.message}"


def lint(flow: CodeWorkflow) -> list[LintProblem]:
    """Every call of ``flow``'s code that would not replay the same, in line order."""
    source = flow.source
    aliases = _aliases(source.module)
    problems = []
    for node in _workflow_nodes(source.node):
        message = _problem(node, aliases, source.ctx_name)
        if message:
            problems.append(LintProblem(str(flow), node.lineno, message))
    return sorted(problems, key=lambda p: p.line)


def _workflow_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of the function's own code: not those of nested functions or lambdas."""
    for child in ast.iter_child_nodes(function):
        if not isinstance(child, SKIPPED):
            yield child
            yield from _workflow_nodes(child)


def _problem(node: ast.AST, aliases: dict[str, str], ctx: str) -> str | None:
    if isinstance(node, ast.For | ast.AsyncFor) and _is_set(node.iter, aliases):
        return SET_ORDER_TEXT
    if isinstance(node, COMPREHENSIONS) and any(
        _is_set(g.iter, aliases)
        for g in node.generators  # type: ignore[attr-defined]
    ):
        return SET_ORDER_TEXT
    if not isinstance(node, ast.Call):
        return None
    name = _qualified(node.func, aliases)
    if name == f"{ctx}.step":
        return _step_problem(node)
    if name is None or name.split(".")[0] == ctx:
        return None
    return _call_problem(name)


def _step_problem(call: ast.Call) -> str | None:
    """A ``ctx.step`` whose literal options say retry the same key with no attempt left
    for it (``retries`` left out is 1, as ``ctx.step`` takes it)."""
    options = {k.arg: k.value for k in call.keywords if k.arg}
    unknown, retries = options.get("on_unknown"), options.get("retries", ast.Constant(1))
    if not (isinstance(unknown, ast.Constant) and unknown.value == "retry_same_key"):
        return None
    if isinstance(retries, ast.Constant) and isinstance(retries.value, int) and retries.value < 2:
        return SAME_KEY_TEXT.format(retries=retries.value)
    return None


def _call_problem(name: str) -> str | None:
    shown = _shown(name)
    advice = CALLS.get(name) or MODULES.get(name.split(".")[0] if "." in name else "")
    if advice:
        return f"{shown}() is not available in workflow code; {advice}"
    if any(name == effect or name.startswith(f"{effect}.") for effect in EFFECTS):
        return f"{shown}() is {EFFECT_TEXT}"
    return None


def _shown(name: str) -> str:
    for prefix, short in SHORT_NAMES.items():
        if name.startswith(prefix):
            return short + name.removeprefix(prefix)
    return name


def _is_set(iterable: ast.expr, aliases: dict[str, str]) -> bool:
    if isinstance(iterable, ast.Set | ast.SetComp):
        return True
    return isinstance(iterable, ast.Call) and _qualified(iterable.func, aliases) in SET_CALLS


def _qualified(expression: ast.expr, aliases: dict[str, str]) -> str | None:
    """``t.time`` after ``import time as t`` is ``time.time``; None when not a name."""
    attributes: list[str] = []
    while isinstance(expression, ast.Attribute):
        attributes.append(expression.attr)
        expression = expression.value
    if not isinstance(expression, ast.Name):
        return None
    head = aliases.get(expression.id, expression.id)
    return ".".join([head, *reversed(attributes)])


def _aliases(module: ast.Module) -> dict[str, str]:
    """Each name the module's imports bind, and the qualified name it stands for."""
    aliases: dict[str, str] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases
