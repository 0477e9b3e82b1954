"""Reading a run's saved results (``bench/.data/results-*.json``) back into dataclasses.

A full run takes twenty minutes; improving how the report presents its figures should
not need another one. ``bench/run --render bench/.data/results-full.json`` rebuilds the
results from the JSON that every run saves and renders the report again.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T")


def load(cls: type[T], data: Any) -> T:
    """Rebuild ``cls`` (a dataclass) from the plain JSON values ``asdict`` produced."""
    return _value(cls, data)


def _value(kind: Any, data: Any) -> Any:
    if data is None:
        return None
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = [k for k in typing.get_args(kind) if k is not type(None)]
        return _value(options[0], data)
    if dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        known = {f.name for f in dataclasses.fields(kind)}
        return kind(**{k: _value(hints[k], v) for k, v in data.items() if k in known})
    if origin is list:
        (item,) = typing.get_args(kind)
        return [_value(item, v) for v in data]
    if origin is tuple:
        args = typing.get_args(kind)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value(args[0], v) for v in data)
        return tuple(_value(a, v) for a, v in zip(args, data, strict=True))
    if origin is dict:
        key, item = typing.get_args(kind)
        return {_value(key, k): _value(item, v) for k, v in data.items()}
    if kind is float:
        return float(data)
    if kind is int:
        return int(data)
    return data
