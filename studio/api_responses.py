"""The error answers of the API, as the OpenAPI document declares them.

Every error the API sends has one shape, ``ErrorOut`` (what ``studio.failures``
sends), whatever raised it. Which statuses a route can answer follows mostly from the
route table: every API route needs a principal (401) and may get a malformed request
(400); a route that needs a role or changes something can be refused (403: the role,
or a session's missing CSRF token); a path naming an object can miss it (404); a route
that reads a JSON body can get one over the size limit (413); and every API route reads
the database, which may be down or restarting (503). What the service behind a route
refuses on its own (404, 409, 422) is named in the table (``Route.errors``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from http import HTTPStatus
from typing import TypedDict

from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import Example

from studio.access import NO_TOKEN
from studio.definitions.schemas import PublishOut
from studio.settings import BODY_TOO_LARGE

DATABASE_UNAVAILABLE = "the database is not answering; nothing was done: try again in a moment"
"""Said (503) while the database is down or restarting: the studio reconnects by itself."""


class ErrorProblem(TypedDict):
    """Where a request went wrong: a field's path (``steps[2].timeout``) and what."""

    path: str
    message: str


@dataclass
class ErrorOut:
    """The body of every error answer of the API (4xx and 5xx alike)."""

    error: str
    """What was wrong and what is allowed, in words."""
    problems: list[ErrorProblem] = field(default_factory=list)


ERROR_EXAMPLES: dict[int, tuple[str, ErrorOut]] = {
    400: (
        "The request is malformed: a parameter or a body field has the wrong type, or is "
        "not one the route takes (``problems`` names it and those it takes).",
        ErrorOut(
            "the request is not in the expected shape",
            [{"path": "revision", "message": "Expected `int`, got `str`"}],
        ),
    ),
    401: ("No valid API token or session was given.", ErrorOut(NO_TOKEN)),
    403: (
        "The token's role does not allow this (or a session's CSRF token is missing).",
        ErrorOut("this needs the operator role in the current team"),
    ),
    404: (
        "Nothing of that name in this team (another team's objects look the same).",
        ErrorOut("no such instance in this team"),
    ),
    409: (
        "The request clashes with what is stored.",
        ErrorOut("this instance id is taken; choose another"),
    ),
    413: (
        "The request body is larger than the studio accepts.",
        ErrorOut(BODY_TOO_LARGE),
    ),
    422: (
        "The content is not acceptable; ``problems`` says where when it can.",
        ErrorOut(
            "the definition has 1 problem; fix them before publishing",
            [{"path": "steps[0].timeout", "message": "must be a duration like 30s"}],
        ),
    ),
    503: (
        "The database did not answer (it is down or restarting); nothing was done.",
        ErrorOut(DATABASE_UNAVAILABLE),
    ),
}


def error_responses(statuses: Iterable[int]) -> dict[int, ResponseSpec]:
    """OpenAPI responses for ``statuses``, each with the error shape and an example."""
    responses = {}
    for status in sorted(set(statuses)):
        description, example = ERROR_EXAMPLES[status]
        responses[status] = ResponseSpec(
            data_container=ErrorOut,
            generate_examples=False,
            description=f"{HTTPStatus(status).phrase}. {description}",
            examples=[Example(summary=HTTPStatus(status).phrase, value=asdict(example))],
        )
    return responses


REPUBLISHED = {
    200: ResponseSpec(
        data_container=PublishOut,
        description="Identical content was already published as this version: nothing "
        "changed (``created`` is false).",
    )
}
"""The other success of publishing: 201 makes a version, 200 finds it made."""
