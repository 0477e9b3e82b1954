"""A workflow function's syntax tree, and the digest of its code.

The outline, the lint and the fingerprint of a code workflow read its *source*, never
run it: the function's ``async def`` is found in the syntax tree of the file that
defines it, so line numbers are the file's (what an author sees in an editor).

``ast_digest`` is what the fingerprint holds of the code: a SHA-256 over the tree of
the function with its positions, docstrings and decorators left out, so reformatting,
comments and docstrings leave it as it is while any change to what the code does
changes it. The tree is written as canonical JSON by this module rather than by
``ast.dump``, whose text differs between Python versions (3.13 leaves empty fields
out): workers on two Python versions must agree on one fingerprint.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.model.canonical import digest

FunctionNode = ast.AsyncFunctionDef | ast.FunctionDef


class SourceUnavailable(ValueError):
    """The workflow's source cannot be read, so it cannot be outlined or fingerprinted."""


@dataclass(frozen=True)
class WorkflowSource:
    """The function's node in its module's tree, and that tree (for its imports)."""

    node: FunctionNode
    module: ast.Module

    @property
    def ctx_name(self) -> str:
        """The name of the function's first parameter: the ``ctx`` its verbs hang off."""
        arguments = [*self.node.args.posonlyargs, *self.node.args.args]
        return arguments[0].arg if arguments else ""


def read_source(function: Callable[..., Any]) -> WorkflowSource:
    """The ``async def`` of ``function`` in the tree of the file that defines it."""
    function = inspect.unwrap(function)
    what = getattr(function, "__qualname__", repr(function))
    try:
        text = inspect.getsource(inspect.getmodule(function) or function)
        first_line = function.__code__.co_firstlineno
    except (OSError, TypeError, AttributeError):
        raise SourceUnavailable(
            f"the source of {what} cannot be read: declare workflows in a Python file"
        ) from None
    module = ast.parse(text)
    for node in ast.walk(module):
        named = isinstance(node, FunctionNode) and node.name == function.__name__
        if named and _first_line(node) == first_line:
            return WorkflowSource(node, module)
    raise SourceUnavailable(f"the source of {what} is not in its file as loaded")


def _first_line(node: FunctionNode) -> int:
    """The line a code object reports as its first: its first decorator's, or ``def``'s."""
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def ast_digest(node: FunctionNode) -> str:
    """SHA-256 of the function's tree without positions, docstrings and decorators."""
    return digest(_shape(node, top=True))


def _shape(value: Any, top: bool = False) -> Any:
    """A JSON form of a syntax tree: each node its type and the fields it sets."""
    if isinstance(value, list):
        return [_shape(item) for item in _without_docstring(value)]
    if isinstance(value, ast.Constant):
        return ["Constant", type(value.value).__name__, repr(value.value)]
    if isinstance(value, ast.AST):
        fields = {
            name: _shape(field)
            for name, field in ast.iter_fields(value)
            if field not in (None, []) and not (top and name == "decorator_list")
        }
        return [type(value).__name__, fields]
    return value


def _without_docstring(body: list[Any]) -> list[Any]:
    """A statement list without its leading docstring (any string-only first line)."""
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return body[1:]
    return body
