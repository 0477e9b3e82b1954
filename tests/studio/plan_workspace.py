"""The drill-plan editor's workspace as the page's htmx drives it, for the plan page
tests of every mode: picking a node on the graph, posting the plan's form to
``compose`` (a pin added or removed), and a pin it refuses. ``url`` is a version's
plans page."""

from __future__ import annotations

from typing import Any

import httpx

from tests.studio.live import SignedInClient

HTMX = {"HX-Request": "true"}


def plans_of(name: str) -> str:
    """The plans page of version 1 of the definition ``name`` (the API's is under ``/api``)."""
    return f"/definitions/{name}/versions/1/plans"


def pick(client: SignedInClient, url: str, node: str) -> httpx.Response:
    """The workspace with ``node`` picked on the graph."""
    return client.get(f"{url}/compose", params={"step": node}, headers=HTMX)


def compose(client: SignedInClient, url: str, fields: dict[str, Any]) -> httpx.Response:
    """The workspace after the plan's form, ``fields``, is posted to ``compose``."""
    return client.form(f"{url}/compose", fields, headers=HTMX)


def assert_pin_refused(client: SignedInClient, url: str, fields: dict[str, Any], why: str) -> None:
    """Composing ``fields`` (a pin added) answers with the workspace saying beside the
    form why the pin was refused, and pinning nothing."""
    workspace = compose(client, url, fields)
    assert 'id="plan-error"' in workspace.text
    assert why in workspace.text
    assert 'name="pin"' not in workspace.text
