"""Instance ids in URLs.

Instance ids may contain ``/`` (a child's id is ``<parent>/<step>``), which a path
segment cannot carry: servers decode ``%2F`` before routing. Ids never contain ``~``
(see ``engine.model.identifiers``), so a path segment writes each ``/`` as ``~`` and reading
it back is unambiguous. Every other character an id may hold is safe in a path.
"""

from __future__ import annotations

from engine.model.identifiers import id_problem
from studio.errors import NotFound

SLASH_IN_PATH = "~"


def instance_ref(instance_id: str) -> str:
    """The path segment that names ``instance_id``."""
    return instance_id.replace("/", SLASH_IN_PATH)


def instance_id_of(ref: str) -> str:
    """The instance id a path segment names; NotFound for a segment no id can give."""
    instance_id = ref.replace(SLASH_IN_PATH, "/")
    if id_problem(instance_id):
        raise NotFound("no such instance in this team")
    return instance_id


def instance_url(instance_id: str, suffix: str = "") -> str:
    """The studio page of an instance (``suffix`` e.g. ``/history``)."""
    return f"/instances/{instance_ref(instance_id)}{suffix}"


def event_url(instance_id: str, sequence: int) -> str:
    """The history page that starts at event ``sequence``, scrolled to it: an event
    cited anywhere on an instance's page is on that page's first history page only
    while the history is short, so an in-page ``#event-N`` link would go nowhere."""
    return instance_url(instance_id, f"/history?after={sequence - 1}#event-{sequence}")
