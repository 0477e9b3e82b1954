"""The JSON shapes of the API: what it accepts and returns (and OpenAPI documents).

Values are converted from the service layer's records here, in one place, so the HTML
pages and the API describe a version, a draft or a problem the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from litestar import Response

from engine.api.queries import PublishedVersion
from studio.definitions.diff import DefinitionDiff, FieldChange
from studio.definitions.drafts import Draft
from studio.definitions.problems import Problems, check_document
from studio.definitions.service import DefinitionSummary, PublishOutcome, short_fingerprint
from studio.machines.views import size
from studio.projection import projected


@dataclass
class ProblemOut:
    path: str
    message: str
    step: str
    field: str
    warning: bool


@dataclass
class VersionOut:
    name: str
    version: str
    fingerprint: str
    short_fingerprint: str
    deprecated: bool
    published_at: datetime
    published_by: str
    steps: int
    """A step list's steps (0 for a state machine or a code workflow: see ``size``)."""
    size: str
    """How big it is, in the words of its mode: "5 steps", "4 states", "7 durable calls"."""
    deprecated_at: datetime | None = None
    deprecated_by: str = ""
    """Who deprecated it (empty while active, and for a version deprecated before the
    studio kept who did)."""


@dataclass
class DefinitionOut:
    name: str
    latest: VersionOut
    versions: int


@dataclass
class VersionDetailOut:
    version: VersionOut
    document: dict[str, Any]


@dataclass
class DocumentIn:
    document: dict[str, Any]


@dataclass
class CompatibilityIn:
    """How publishing treats running instances: the same field for a document
    (``PublishIn``) and for a draft (``POST /api/drafts/{id}/publish``)."""

    compatibility: Literal["report", "require"] = "report"
    """What publishing does with its judgement of the instances of other versions still
    running: ``report`` keeps the report with the version (shown on its page);
    ``require`` also refuses (409, naming them) when any could not move to this one.
    A word, not a boolean, so that ``0`` or ``"yes"`` is refused rather than read."""

    @property
    def require_compatible(self) -> bool:
        return self.compatibility == "require"


@dataclass
class PublishIn(CompatibilityIn, DocumentIn):
    """A document to publish, and what to do with incompatible running instances."""


@dataclass
class PublishOut:
    name: str
    version: str
    fingerprint: str
    short_fingerprint: str
    created: bool
    """False when identical content was already published (nothing changed)."""


@dataclass
class ValidationOut:
    valid: bool
    fingerprint: str | None
    problems: list[ProblemOut]


@dataclass
class FieldChangeOut:
    field: str
    before: Any
    after: Any


@dataclass
class StepChangeOut:
    step: str
    kind: str
    change: str
    fields: list[FieldChangeOut]


@dataclass
class DiffOut:
    left: VersionOut
    right: VersionOut
    top: list[FieldChangeOut]
    steps: list[StepChangeOut]


@dataclass
class DraftOut:
    id: str
    title: str
    document: dict[str, Any]
    based_on: str
    revision: int
    created_by: str
    updated_by: str
    created_at: datetime
    updated_at: datetime
    valid: bool
    problems: list[ProblemOut]


@dataclass
class DraftIn:
    """A new draft: from a document, or from a published ``from_name``@``from_version``."""

    document: dict[str, Any] | None = None
    from_name: str | None = None
    from_version: str | None = None


@dataclass
class DraftReplaceIn:
    revision: int
    document: dict[str, Any]


@dataclass
class DraftEditIn:
    """One editor operation, as the editor's buttons make them.

    ``insert`` (at, kind), ``branch`` (index, kind), ``move`` (index, direction),
    ``delete`` (index), ``update`` (index, fields: dotted path -> text),
    ``header`` (name, version).
    """

    op: Literal["insert", "branch", "move", "delete", "update", "header"]
    revision: int
    at: int | None = None
    kind: str | None = None
    index: int | None = None
    direction: Literal["up", "down"] | None = None
    fields: dict[str, str] | None = None
    name: str | None = None
    version: str | None = None


def published(outcome: PublishOutcome) -> Response[PublishOut]:
    """201 for a new version; 200 when identical content was already published."""
    d = outcome.definition
    out = PublishOut(
        d.name, d.version, d.fingerprint, short_fingerprint(d.fingerprint), outcome.created
    )
    return Response(out, status_code=201 if outcome.created else 200)


def version_out(published: PublishedVersion) -> VersionOut:
    d = published.definition
    return VersionOut(
        d.name,
        d.version,
        d.fingerprint,
        short_fingerprint(d.fingerprint),
        published.deprecated,
        published.published_at,
        published.published_by,
        len(d.steps),
        size(d),
        published.deprecated_at,
        published.deprecated_by,
    )


def definition_out(summary: DefinitionSummary) -> DefinitionOut:
    return DefinitionOut(summary.name, version_out(summary.latest), summary.versions)


def problems_out(problems: Problems) -> list[ProblemOut]:
    return [ProblemOut(p.path, p.message, p.step, p.field, p.warning) for p in problems.items]


def draft_out(draft: Draft, targets: list[str] | None = None) -> DraftOut:
    problems = check_document(draft.document, targets)
    checked = {"valid": problems.definition is not None, "problems": problems_out(problems)}
    return projected(DraftOut, draft, id=draft.draft_id, **checked)


def _changes(changes: tuple[FieldChange, ...]) -> list[FieldChangeOut]:
    return [FieldChangeOut(c.field, c.before, c.after) for c in changes]


def diff_out(left: PublishedVersion, right: PublishedVersion, diff: DefinitionDiff) -> DiffOut:
    return DiffOut(
        version_out(left),
        version_out(right),
        _changes(diff.top),
        [StepChangeOut(s.step, s.kind, s.change.value, _changes(s.fields)) for s in diff.steps],
    )
