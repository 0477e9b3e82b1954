"""The outline of a code workflow: its durable verbs and the control flow around them.

Read from the syntax tree at declaration (never by running the code), stored in the
catalog with the definition and drawn by the studio. Nodes, in source order:

- a ``ctx`` call: ``{"verb": "step|sleep|wait|race|all|spawn|now|random|uuid4",
  "name": ..., "line": N}`` plus the verb's fields: a step's ``retries``, ``timeout``
  and ``compensated``; the ``timeout`` of a sleep (its duration), a wait, a race or an
  all; what a race or an all is ``on``. ``name`` is the step's name, the awaited
  signal or the spawned definition ('' for the other verbs). A name or option written
  as a literal is its value; anything computed is its source (``f'item-{i}'``);
- ``{"if": "<test>", "line": N, "then": [...], "else": [...]}`` (a ``match`` is a
  chain of them, one per case: ``"<subject> matches <pattern>"``);
- ``{"loop": "<for or while header>", "line": N, "body": [...]}`` (comprehensions too);
- ``{"try": true, "line": N, "body": [...], "handlers": [{"catch": "<type>", "body":
  [...]}]}`` (``"catch": ""`` for a bare ``except``); ``else`` and ``finally`` follow
  the node;
- ``{"return": true, "line": N}`` and ``{"raise": true, "line": N}``.

Control nodes with nothing of the above inside are left out, and so are nested
functions and lambdas: they are step bodies or helpers, not the workflow's path.
Expressions are searched in evaluation order (arguments before the call), so
``ctx.race(ctx.spawn("shipping", o), "received")`` outlines the spawn first.
"""

from __future__ import annotations

import ast
from typing import Any

from engine.modes.code.journal import Verb

Node = dict[str, Any]

VERBS = {
    "step": Verb.STEP,
    "sleep": Verb.SLEEP,
    "wait_signal": Verb.WAIT,
    "race": Verb.RACE,
    "all": Verb.ALL,
    "spawn": Verb.SPAWN,
    "now": Verb.NOW,
    "random": Verb.RANDOM,
    "uuid4": Verb.UUID4,
}
"""``ctx`` methods that are durable verbs, and the verb each records."""
NAMED = frozenset({Verb.STEP, Verb.WAIT, Verb.SPAWN})
"""Verbs whose first argument is their name."""
STEP_DEFAULTS = {"retries": 1, "timeout": None}
SKIPPED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def outline(node: ast.AsyncFunctionDef | ast.FunctionDef, ctx_name: str) -> list[Node]:
    """The outline of the function ``node`` whose ``ctx`` parameter is ``ctx_name``."""
    return _Outliner(ctx_name).block(node.body)


def without_lines(nodes: Any) -> Any:
    """The outline with every ``line`` left out: what the fingerprint covers, so that a
    comment or a blank line above a verb does not make the code another version."""
    if isinstance(nodes, list):
        return [without_lines(n) for n in nodes]
    if isinstance(nodes, dict):
        return {k: without_lines(v) for k, v in nodes.items() if k != "line"}
    return nodes


def source_or_value(expression: ast.expr) -> Any:
    """A literal's value, anything else as its source."""
    if isinstance(expression, ast.Constant):
        return expression.value
    return ast.unparse(expression)


class _Outliner:
    def __init__(self, ctx_name: str) -> None:
        self.ctx = ctx_name

    def block(self, statements: list[ast.stmt]) -> list[Node]:
        return [node for statement in statements for node in self.statement(statement)]

    def statement(self, statement: ast.stmt) -> list[Node]:
        if isinstance(statement, SKIPPED):
            return []
        handler = getattr(self, f"_{type(statement).__name__.lower()}", None)
        if handler is not None:
            return handler(statement)
        return self.expressions(statement)

    def expressions(self, node: ast.AST) -> list[Node]:
        """The ctx calls (and comprehension loops holding them) in ``node``'s expressions,
        in evaluation order; nested statements are not searched (their handlers do)."""
        found: list[Node] = []
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.stmt, *SKIPPED)):
                continue
            found.extend(self.expression(child))
        return found

    def expression(self, node: ast.AST) -> list[Node]:
        if isinstance(node, COMPREHENSIONS):
            return self._comprehension(node)
        if isinstance(node, ast.IfExp):
            return [*self.expression(node.test), *_control(_branches(node, self))]
        found = self.expressions(node)
        verb = self._verb(node)
        if verb is not None:
            found.append(self._call(node, verb))
        return found

    def _verb(self, node: ast.AST) -> Verb | None:
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            return None
        target = node.func.value
        if not isinstance(target, ast.Name) or target.id != self.ctx:
            return None
        return VERBS.get(node.func.attr)

    def _call(self, call: ast.Call, verb: Verb) -> Node:
        options = {k.arg: k.value for k in call.keywords if k.arg is not None}
        arguments = [a for a in call.args if not isinstance(a, ast.Starred)]
        named = verb in NAMED and arguments
        node: Node = {
            "verb": verb.value,
            "name": source_or_value(arguments[0]) if named else "",
            "line": call.lineno,
        }
        if verb is Verb.STEP:
            for option, default in STEP_DEFAULTS.items():
                node[option] = source_or_value(options[option]) if option in options else default
            node["compensated"] = _given(options.get("compensate"))
        elif verb is Verb.SLEEP:
            node["timeout"] = source_or_value(arguments[0]) if arguments else None
        elif verb in (Verb.WAIT, Verb.RACE, Verb.ALL):
            timeout = options.get("timeout")
            node["timeout"] = None if timeout is None else source_or_value(timeout)
        if verb in (Verb.RACE, Verb.ALL):
            node["on"] = [source_or_value(a) for a in call.args]
        return node

    def _if(self, statement: ast.If) -> list[Node]:
        return [*self.expression(statement.test), *_control(_branches(statement, self))]

    def _match(self, statement: ast.Match) -> list[Node]:
        subject = ast.unparse(statement.subject)
        rest: list[Node] = []
        for case in reversed(statement.cases):
            test = f"{subject} matches {ast.unparse(case.pattern)}"
            if case.guard is not None:
                test += f" if {ast.unparse(case.guard)}"
            rest = _control(
                {
                    "if": test,
                    "line": case.pattern.lineno,
                    "then": self.block(case.body),
                    "else": rest,
                }
            )
        return [*self.expression(statement.subject), *rest]

    def _for(self, statement: ast.For | ast.AsyncFor) -> list[Node]:
        keyword = "async for" if isinstance(statement, ast.AsyncFor) else "for"
        header = f"{keyword} {ast.unparse(statement.target)} in {ast.unparse(statement.iter)}"
        return [
            *self.expression(statement.iter),
            *_loop(header, statement.lineno, self.block(statement.body)),
            *self.block(statement.orelse),
        ]

    _asyncfor = _for

    def _while(self, statement: ast.While) -> list[Node]:
        header = f"while {ast.unparse(statement.test)}"
        body = [*self.expression(statement.test), *self.block(statement.body)]
        return [*_loop(header, statement.lineno, body), *self.block(statement.orelse)]

    def _try(self, statement: ast.Try) -> list[Node]:
        handlers = [
            {
                "catch": "" if h.type is None else ast.unparse(h.type),
                "body": self.block(h.body),
            }
            for h in statement.handlers
        ]
        body = self.block(statement.body)
        node: Node = {"try": True, "line": statement.lineno, "body": body, "handlers": handlers}
        kept = [node] if body or any(h["body"] for h in handlers) else []
        return [*kept, *self.block(statement.orelse), *self.block(statement.finalbody)]

    _trystar = _try

    def _with(self, statement: ast.With | ast.AsyncWith) -> list[Node]:
        return [*self.expressions(statement), *self.block(statement.body)]

    _asyncwith = _with

    def _return(self, statement: ast.Return) -> list[Node]:
        return [*self.expressions(statement), {"return": True, "line": statement.lineno}]

    def _raise(self, statement: ast.Raise) -> list[Node]:
        return [*self.expressions(statement), {"raise": True, "line": statement.lineno}]

    def _comprehension(self, node: ast.AST) -> list[Node]:
        generators: list[ast.comprehension] = node.generators  # type: ignore[attr-defined]
        parts = [
            " ".join(
                [
                    "async for" if g.is_async else "for",
                    ast.unparse(g.target),
                    "in",
                    ast.unparse(g.iter),
                    *(f"if {ast.unparse(test)}" for test in g.ifs),
                ]
            )
            for g in generators
        ]
        first = self.expression(generators[0].iter)
        body = [
            *(n for g in generators[1:] for n in self.expression(g.iter)),
            *(n for g in generators for test in g.ifs for n in self.expression(test)),
            *(
                n
                for part in ast.iter_child_nodes(node)
                if not isinstance(part, ast.comprehension)
                for n in self.expression(part)
            ),
        ]
        return [*first, *_loop(" ".join(parts), node.lineno, body)]  # type: ignore[attr-defined]


def _branches(node: ast.If | ast.IfExp, outliner: _Outliner) -> Node:
    """An if statement's or expression's node (its test already searched by the caller)."""
    if isinstance(node, ast.IfExp):
        then, otherwise = outliner.expression(node.body), outliner.expression(node.orelse)
    else:
        then, otherwise = outliner.block(node.body), outliner.block(node.orelse)
    return {"if": ast.unparse(node.test), "line": node.lineno, "then": then, "else": otherwise}


def _control(node: Node) -> list[Node]:
    """``node`` when any of its branches holds something, else nothing."""
    return [node] if node["then"] or node["else"] else []


def _loop(header: str, line: int, body: list[Node]) -> list[Node]:
    return [{"loop": header, "line": line, "body": body}] if body else []


def _given(value: ast.expr | None) -> bool:
    """Whether an option was given a value other than a literal None."""
    return value is not None and not (isinstance(value, ast.Constant) and value.value is None)
