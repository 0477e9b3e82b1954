"""The definition document of a code workflow: the ``code`` mode's part of
``parse_definition``.

A code workflow's document names its code and says what it was when published::

    {"name": "order-saga", "version": "1", "mode": "code", "deprecated": false,
     "module": "examples.order_saga", "function": "order_saga",
     "code": "<ast digest>", "outline": [...]}

``module`` and ``function`` (its qualified name) tell an operator where the code is;
``code`` is its ``ast_digest`` (``engine.modes.code.source``) and ``outline`` the verbs
and control flow the studio draws (``engine.modes.code.outline``). The fingerprint
covers all of them except the outline's line numbers, which move when a comment is
added above a verb without the code changing: the catalog stores them, the
fingerprint does not (``CodeManifest.document`` against ``exchange``). The code itself
runs only where an app declares it (``ActivityRegistry.workflow``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from engine.model.definitions import Definition
from engine.model.spec_reader import SpecReader, join
from engine.modes.code.outline import without_lines

FIELDS = frozenset({"module", "function", "code", "outline"})
"""The fields a code workflow's document has beside the ones every mode's has."""
MODULE_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
FUNCTION_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_<>]*(\.[A-Za-z_<>][A-Za-z0-9_<>]*)*$")
"""A qualified name: ``order_saga``, ``Sagas.order``, ``make.<locals>.flow``."""
DIGEST_PATTERN = re.compile(r"^[0-9a-f]{64}$")
MAX_NAME_LENGTH = 300
"""The longest module or function name a document may give."""


@dataclass(frozen=True)
class CodeManifest:
    """The body of a ``code`` definition. The outline is kept as its canonical JSON so
    that the manifest (and the definition holding it) stays immutable and hashable."""

    module: str
    function: str
    code: str
    outline_json: str

    @property
    def outline(self) -> list[dict[str, Any]]:
        """The outline's nodes (a fresh copy: callers may not change the manifest)."""
        return json.loads(self.outline_json)

    def document(self) -> dict[str, Any]:
        """The fingerprinted fields: the outline without its line numbers."""
        return {**self._names(), "outline": without_lines(self.outline)}

    def exchange(self) -> dict[str, Any]:
        """The stored fields: the outline with its line numbers, for the studio."""
        return {**self._names(), "outline": self.outline}

    def _names(self) -> dict[str, str]:
        return {"module": self.module, "function": self.function, "code": self.code}


def read(reader: SpecReader, top: dict[str, Any]) -> dict[str, Any] | None:
    """The manifest of the document; None when anything in it is wrong."""
    module = reader.string(top, "module", "", _matching(MODULE_PATTERN, "a dotted module name"))
    function = reader.string(
        top, "function", "", _matching(FUNCTION_PATTERN, "a function's qualified name")
    )
    code = reader.string(top, "code", "", _matching(DIGEST_PATTERN, "64 lowercase hex digits"))
    outline = _outline(reader, top.get("outline"))
    if module is None or function is None or code is None or outline is None:
        return None
    return {"manifest": CodeManifest(module, function, code, outline)}


def check(reader: SpecReader, definition: Definition) -> None:
    """Nothing is left to check across fields: everything was checked while reading."""


def _matching(pattern: re.Pattern[str], shape: str) -> Any:
    def problem(value: str) -> str | None:
        if len(value) > MAX_NAME_LENGTH or not pattern.match(value):
            return f"must be {shape} of at most {MAX_NAME_LENGTH} characters"
        return None

    return problem


def _outline(reader: SpecReader, value: Any) -> str | None:
    """The outline as canonical JSON: a list of node objects (the code made them; a
    document that is not such a list was not made from code)."""
    if not isinstance(value, list):
        reader.error("outline", "is required: a list of outline nodes")
        return None
    wrong = [i for i, node in enumerate(value) if not isinstance(node, dict)]
    for index in wrong:
        reader.error(join("outline", index), "must be a JSON object (an outline node)")
    return None if wrong else json.dumps(value, sort_keys=True, separators=(",", ":"))
