"""API shapes built from the studio's and the engine's own objects, field by name.

An API shape names what the API shows (often fewer fields than the object it comes
from: no team ids, no payloads). Copying its fields one by one in order wrote each
shape twice; ``projected`` reads every field the shape declares from the object's
attribute of the same name, so a builder spells out only what differs.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

Shape = TypeVar("Shape")


def projected(shape: type[Shape], source: object, **given: Any) -> Shape:
    """``shape`` with each field from ``given`` if named there, else from ``source``."""
    names = [f.name for f in fields(shape)]  # type: ignore[arg-type]
    return shape(**{n: given[n] if n in given else getattr(source, n) for n in names})
