"""Links from an instance page to its trace in the operator's tracing UI.

``WAYLINE_TRACE_URL`` (``StudioSettings.trace_url``) is the UI's address for one trace
with ``{trace_id}`` where the 32-hex trace id goes, e.g. Jaeger's
``http://localhost:16686/trace/{trace_id}``. The id is the one the engine's spans use
for the instance (``engine.trace_id_of``): the trace of the caller that started it, or
the one derived from its id. Without the setting, pages show no link.
"""

from __future__ import annotations

from typing import Any

from engine import trace_id_of

TRACE_URL_ENV = "WAYLINE_TRACE_URL"
PLACEHOLDER = "{trace_id}"


def trace_url_problem(template: str) -> str:
    """Why ``template`` cannot be a trace address ('' when it can, or when unset)."""
    if not template:
        return ""
    if not template.startswith(("http://", "https://")) or PLACEHOLDER not in template:
        return f"{TRACE_URL_ENV} must be an http(s) address holding {PLACEHOLDER}"
    return ""


def trace_link(template: str, state: Any) -> str:
    """The address of ``state``'s trace under ``template`` ('' when none is set)."""
    if not template:
        return ""
    return template.replace(PLACEHOLDER, trace_id_of(state.instance_id, state.trace_context))
