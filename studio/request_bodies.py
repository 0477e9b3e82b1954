"""What a route's JSON body may hold, read from the dataclass its handler takes as ``data``.

Litestar decodes a body into that dataclass and drops every key the class does not
declare, so a misspelt optional field was silently ignored and its default taken:
``{"reason": "...", "cuont": 5}`` released a whole hold, and ``{"id": "o-1"}`` (for
``instance_id``) started a new instance on every retry. ``unknown_fields`` finds such
keys at any depth of nested request classes, so that the request is refused before
anything is read or written, naming each key and the fields allowed where it stands.
``allowed_values`` names the values a field takes when the decoder refuses one (its
own words are only "Invalid enum value").

Free-form values (a document, an input, a payload: ``dict[str, Any]`` or ``Any``) are
not request classes and are never looked into.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal

from litestar import Litestar
from litestar.openapi.spec import Schema

Problem = dict[str, str]


def body_class(handler: object) -> tuple[type | None, bool]:
    """The dataclass ``handler`` takes as its JSON body (None when it takes none), and
    whether the body is required (the handler has no default for it)."""
    signature = getattr(handler, "parsed_fn_signature", None)
    data = signature.parameters.get("data") if signature is not None else None
    if data is None:
        return None, False
    classes = _request_classes(data.annotation)
    return (classes[0] if classes else None), not data.is_optional


def unknown_fields(cls: type, value: Any, path: str = "") -> list[Problem]:
    """A problem for each key of ``value`` (the decoded body, or a part of it at
    ``path``) that ``cls`` and the request classes nested in it do not declare."""
    if not isinstance(value, dict):
        return []  # the decoder says what the value should have been
    hints = _fields(cls)
    problems = []
    for key, item in value.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in hints:
            problems.append({"path": where, "message": f"not a field here; it takes {takes(cls)}"})
            continue
        problems += _nested(hints[key], item, where)
    return problems


def takes(cls: type) -> str:
    """The fields of a request class in words, saying which are required."""
    fields = dataclasses.fields(cls)
    return in_words([f.name for f in fields], [f.name for f in fields if _required(f)])


def in_words(names: list[str], required: list[str]) -> str:
    """Names a request may send, saying which of them it must (a body's fields, a
    route's query parameters)."""
    named = ", ".join(names)
    return f"{named} ({', '.join(required)} required)" if required else f"{named}, all optional"


def allowed_values(handler: object, key: str) -> tuple[str, ...]:
    """The values the field or query parameter ``key`` (a Litestar error's dotted key:
    ``role``, ``filter.status``, ``items.0.action``) allows, when it is a closed set."""
    signature = getattr(handler, "parsed_fn_signature", None)
    if signature is None:
        return ()
    names = [part for part in key.split(".") if not part.isdigit()]
    parameter = signature.parameters.get(names[0]) if names else None
    if parameter is not None and names[0] != "data":  # a query or path parameter
        return _literals(parameter.annotation) if len(names) == 1 else ()
    cls, _ = body_class(handler)
    annotation: Any = cls
    for name in names:
        found = [_fields(c).get(name) for c in _request_classes(annotation)]
        annotation = next((a for a in found if a is not None), None)
        if annotation is None:
            return ()
    return _literals(annotation)


def _nested(annotation: Any, value: Any, path: str) -> list[Problem]:
    """The unknown keys inside ``value`` when ``annotation`` holds request classes."""
    classes = _request_classes(annotation)
    if not classes:
        return []
    if isinstance(value, list) and _is_list(annotation):
        items = enumerate(value)
        return [p for i, item in items for p in _nested(classes[0], item, f"{path}[{i}]")]
    return unknown_fields(classes[0], value, path)


def _fields(cls: type) -> dict[str, Any]:
    """The declared fields of a request class with their resolved types, in order."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _required(field: dataclasses.Field[Any]) -> bool:
    missing = dataclasses.MISSING
    return field.default is missing and field.default_factory is missing


def _members(annotation: Any) -> list[Any]:
    """The types ``annotation`` is made of: the members of a union, the item of a list."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list):
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [annotation]


def _request_classes(annotation: Any) -> list[type]:
    return [m for m in _members(annotation) if dataclasses.is_dataclass(m) and isinstance(m, type)]


def _is_list(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is list:
        return True
    return origin in (typing.Union, types.UnionType) and any(
        _is_list(a) for a in typing.get_args(annotation)
    )


def _literals(annotation: Any) -> tuple[str, ...]:
    return tuple(
        str(value)
        for member in _members(annotation)
        if typing.get_origin(member) is Literal
        for value in typing.get_args(member)
    )


def close_request_schemas(app: Litestar) -> None:
    """Declare in the app's OpenAPI document that no request class takes other fields
    (``additionalProperties: false``), as ``unknown_fields`` enforces, so that the
    document tells a script (or a fuzzer) the truth. Run at startup, before the
    document is first served (Litestar keeps it once built)."""
    classes: set[type] = set()
    for route in app.routes:
        for handler in getattr(route, "route_handlers", ()):
            cls, _ = body_class(handler)
            if cls is not None:
                classes |= _with_nested(cls)
    names = {cls.__name__ for cls in classes}
    schemas = app.openapi_schema.components.schemas or {}
    for schema in schemas.values():
        if isinstance(schema, Schema) and schema.title in names:
            schema.additional_properties = False


def _with_nested(cls: type) -> set[type]:
    """``cls`` and every request class its fields hold, at any depth."""
    found = {cls}
    for annotation in _fields(cls).values():
        for nested in _request_classes(annotation):
            found |= _with_nested(nested)
    return found
