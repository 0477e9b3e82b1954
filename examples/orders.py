"""Activities for the order-fulfillment example (``examples/order_fulfillment.json``).

Run a worker for them with ``wayline worker --app examples.orders:app``. Each handler
records its effect, keyed by the attempt's idempotency key, in the JSON-lines file
named by ``WAYLINE_EFFECTS_FILE`` (when set), so tests and the demo can count real
effects apart from recorded outcomes. The instance input can script what goes wrong:
``{"fail": {"payments.charge": 2}}`` fails the first two attempts of that target before
any effect; ``{"unknown": {"payments.charge": 1}}`` makes its first attempt's effect
happen and its answer be lost (an unknown outcome, which the example's charge holds for
an operator to resolve, and its checks retry with the same key).
"""

from __future__ import annotations

import json
import os
from typing import Any

from engine import ActivityFailure, ActivityRegistry, ActivityRequest, UnknownOutcome

EFFECTS_ENV = "WAYLINE_EFFECTS_FILE"

app = ActivityRegistry()


def record_effect(request: ActivityRequest) -> None:
    """Append one effect line; O_APPEND keeps concurrent writers' lines whole."""
    path = os.environ.get(EFFECTS_ENV)
    if not path:
        return
    line = (
        json.dumps(
            {
                "key": request.idempotency_key,
                "target": request.target,
                "instance": request.instance_id,
                "step": request.step,
                "attempt": request.attempt,
            }
        )
        + "\n"
    )
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _scripted(request: ActivityRequest, what: str) -> bool:
    """Whether the instance's input scripts ``what`` (``fail``, ``unknown``) for this
    attempt of the request's target."""
    script = (request.input or {}).get(what, {}) if isinstance(request.input, dict) else {}
    return request.attempt <= int(script.get(request.target, 0))


def _effect(result: Any):
    def handler(request: ActivityRequest) -> Any:
        if _scripted(request, "fail"):
            raise ActivityFailure(
                "scripted-failure", f"{request.target} failed on purpose", retryable=True
            )
        record_effect(request)
        if _scripted(request, "unknown"):  # as a gateway that timed out after charging
            return UnknownOutcome("scripted-unknown")
        return result(request) if callable(result) else result

    return handler


app.register("inventory.reserve", _effect(lambda r: {"reservation": f"R-{r.instance_id}"}))
app.register("inventory.release", _effect({"released": True}))
app.register("payments.charge", _effect(lambda r: {"charge": f"C-{r.instance_id}"}))
app.register("payments.refund", _effect({"refunded": True}))
app.register("fraud.check", _effect({"fraud": "clear"}))
app.register("inventory.check", _effect({"stock": "ok"}))
app.register("notifications.send", _effect({"sent": True}))
