"""Definition files: read a definition in the JSON exchange format from disk and validate it.

The command line (``wayline definition check|publish``), the studio's first start and
the demo all read definition files the same way, through ``load_definition``; a file
that cannot be used at all raises ``DefinitionFileError`` with one line for users.
"""

from __future__ import annotations

from pathlib import Path

from engine.model.definitions import Definition
from engine.model.errors import DefinitionFileError, InputRefused
from engine.model.inputs import read_json
from engine.model.validation import parse_definition


def load_definition(path: str | Path) -> Definition:
    """Read and validate a definition file (its path as a ``Path`` or a ``str``).

    Raises DefinitionFileError when the file is unreadable or not JSON, and
    DefinitionInvalid (listing every problem) when the document is not a definition.
    The file is read as JSON bytes are (UTF-8, or UTF-16/32 announced by a byte order
    mark); bytes that are not text say which byte and where, never a codec's jargon.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DefinitionFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        document = read_json(data, str(path))
    except InputRefused as exc:  # not UTF-8, not JSON, nested too deeply, a NUL
        raise DefinitionFileError(str(exc)) from exc
    return parse_definition(document)
