"""Parsing and validating definitions from the JSON exchange format.

``parse_definition`` reads the fields every definition has (name, version, mode,
deprecated) and hands the rest of the document to its mode (``engine.modes``), which
reads its own fields (a step list's ``steps``) and then checks their structure. It
raises one DefinitionInvalid listing every problem with its JSON path. A document
whose mode is missing or unknown is still read as the default mode (the first
installed: step lists, the original format), so it gets every error at once too.
"""

from __future__ import annotations

from typing import Any

from engine import modes
from engine.model.definitions import Definition
from engine.model.errors import DefinitionInvalid
from engine.model.identifiers import name_problem
from engine.model.spec_reader import SpecReader

HEAD_FIELDS = frozenset({"name", "version", "mode", "deprecated"})
"""The fields of every definition document, whatever its mode."""
DEFAULT_MODE = "orchestration"
"""A document's ``mode`` when it names none: a step list the engine advances. The
canonical form always writes it, so leaving it out does not change a fingerprint."""


def parse_definition(document: Any) -> Definition:
    """Validate an exchange-format document; raise DefinitionInvalid with every error."""
    reader = SpecReader()
    definition = read_document(reader, document)
    if reader.errors or definition is None:
        raise DefinitionInvalid(reader.errors)
    return definition


def read_document(reader: SpecReader, document: Any) -> Definition | None:
    """Read the head, then the mode's own fields and structure; None when unusable."""
    if isinstance(document, dict) and "mode" not in document:
        document = {**document, "mode": DEFAULT_MODE}
    named = modes.find(document.get("mode")) if isinstance(document, dict) else None
    rules = named or next(iter(modes.installed().values()))
    top = reader.object(document, "", HEAD_FIELDS | rules.fields)
    if top is None:
        return None
    name = reader.string(top, "name", "", name_problem)
    version = reader.string(top, "version", "", name_problem)
    mode = reader.choice(top, "mode", "", modes.installed())
    deprecated = reader.boolean(top, "deprecated", "", False)
    body = rules.read(reader, top)
    if body is None:
        return None
    # The structure is checked even when the head is not usable, so every problem of
    # the document is reported at once (its steps do not depend on its name).
    definition = Definition(name or "", version or "", rules.name, deprecated, **body)
    rules.check(reader, definition)
    if name is None or version is None or mode is None:
        return None
    return definition
