"""Declaring a code workflow: ``@app.workflow("order-saga", version="1")``.

The decorator (``ActivityRegistry.workflow``, which calls ``declare``) records an
``async def f(ctx, input)`` under a name and an explicit version and returns the
function unchanged. Declaring reads the function's source (``source``), never runs it:
its outline, its code's digest, the definition document those make
(``engine.modes.code.document``) and the fingerprint. The document is validated by the
reader that reads definition files (``parse_definition``), so a code workflow
published from an app and one read back from the catalog are the same definition with
the same fingerprint. Running the code is the driver's part; nothing here imports it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from engine.model.definitions import Definition, DefinitionRef, Mode, definition_to_json
from engine.model.identifiers import name_problem
from engine.model.validation import parse_definition
from engine.modes.code.outline import outline
from engine.modes.code.source import WorkflowSource, ast_digest, read_source

WorkflowFunction = Callable[..., Any]
"""``async def f(ctx, input)``: the workflow's code."""


@dataclass(frozen=True)
class CodeWorkflow:
    """A declared code workflow: its name and version, and the code that runs it."""

    name: str
    version: str
    function: WorkflowFunction
    module: str
    qualname: str

    @cached_property
    def source(self) -> WorkflowSource:
        """The function's syntax tree (read once, when declared)."""
        return read_source(self.function)

    @cached_property
    def outline(self) -> list[dict[str, Any]]:
        """The verbs and control flow the studio draws (``engine.modes.code.outline``)."""
        return outline(self.source.node, self.source.ctx_name)

    @cached_property
    def ast_digest(self) -> str:
        """The digest of the code without positions, docstrings and decorators."""
        return ast_digest(self.source.node)

    @cached_property
    def definition(self) -> Definition:
        """The validated definition the catalog publishes and workers pin to."""
        return parse_definition(
            {
                "name": self.name,
                "version": self.version,
                "mode": Mode.CODE.value,
                "module": self.module,
                "function": self.qualname,
                "code": self.ast_digest,
                "outline": self.outline,
            }
        )

    @property
    def document(self) -> dict[str, Any]:
        """The definition document the catalog stores (outline with line numbers)."""
        return definition_to_json(self.definition)

    @property
    def fingerprint(self) -> str:
        return self.definition.fingerprint

    @property
    def ref(self) -> DefinitionRef:
        return self.definition.ref

    def __str__(self) -> str:
        return f"{self.name}@{self.version}"


def declare(name: str, version: str, function: WorkflowFunction) -> CodeWorkflow:
    """A workflow of ``function``; ValueError or TypeError saying what is wrong, raised
    when the app is imported rather than when a run first reaches the code."""
    for what, value in (("name", name), ("version", version)):
        problem = name_problem(value)
        if problem:
            raise ValueError(f"workflow {what} {problem}")
    if not inspect.iscoroutinefunction(inspect.unwrap(function)):
        called = getattr(function, "__qualname__", type(function).__name__)
        raise TypeError(f"workflow {name}@{version}: {called} must be an async def")
    flow = CodeWorkflow(name, version, function, function.__module__, function.__qualname__)
    if not flow.source.ctx_name:
        raise TypeError(f"workflow {flow}: {flow.qualname} must take (ctx, input)")
    flow.definition  # noqa: B018 - validate now, at declaration
    return flow
