"""The reason an operator gives for an audited action (a command on one instance, a bulk
action, a dead letter's resolution), checked the same way for each before the engine
records it."""

from __future__ import annotations

from engine.model.limits import MAX_REASON_LENGTH
from studio.errors import Invalid


def operator_reason(text: str) -> str:
    """``text`` without its surrounding spaces; Invalid at ``reason`` (the field every
    form and API body holds it in) unless 1 to MAX_REASON_LENGTH characters are left."""
    reason = text.strip()
    if not reason or len(reason) > MAX_REASON_LENGTH:
        raise Invalid.at("reason", f"a reason of 1 to {MAX_REASON_LENGTH} characters is required")
    return reason
