"""A code-first order saga (seed 001): a race, an all, a spawned child, compensated
steps, and ``ctx.step_id`` used as the payment gateway's idempotency key.

``order-saga`` reserves the stock (undone by releasing it), waits up to 72 h for the
order to be ``paid`` or ``cancelled``, charges the card (three attempts in all,
refunded when the saga unwinds), spawns ``shipping``, waits up to 7 days for the
shipment and for the customer's ``received``, lets an hour pass and settles.
``shipping`` prints a label and waits up to 2 days for ``picked-up``.

Run it (README, "Running code-first workflows")::

    wayline definition publish --app examples.order_saga:app
    wayline worker --app examples.order_saga:app &
    wayline start order-saga --id o-42 --input '{"sku": "mug", "amount": 1200}'
    wayline signal order-saga/o-42 paid --signal-id pay-1 --payload '{"by": "ada"}'

Each effect (a reservation, a charge, a refund, a label, a settlement) is appended to
the JSON-lines file named by ``WAYLINE_EFFECTS_FILE`` when it is set, with the
``step_id`` it was performed under, so a test can count real effects apart from what
history says. The gateway here is that file: a real one deduplicates by the key.
An input ``{"decline": N}`` makes the first N charges fail (a declared failure).
"""

from __future__ import annotations

import json
import os
from typing import Any

from engine import ActivityRegistry
from engine.modes.code.context import Context
from engine.modes.code.failures import StepFailure
from examples.orders import EFFECTS_ENV

app = ActivityRegistry()


def effect(ctx: Context, what: str, **fields: Any) -> dict[str, Any]:
    """Perform (record) one external effect under the running step's ``step_id``."""
    record = {"effect": what, "key": ctx.step_id, **fields}
    path = os.environ.get(EFFECTS_ENV)
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode())
        finally:
            os.close(fd)
    return record


@app.workflow("order-saga", version="1")
async def order_saga(ctx: Context, order: dict) -> dict:
    reservation = await ctx.step(
        "reserve",
        lambda: effect(ctx, "reserve", sku=order["sku"]),
        compensate=lambda done: effect(ctx, "release", reservation=done["key"]),
    )
    _, which = await ctx.race("paid", "cancelled", timeout="72h")
    if which != "paid":
        return {"outcome": "void", "reservation": reservation["key"]}

    def charge() -> dict[str, Any]:
        declined = int(order.get("decline", 0))
        if int(ctx.step_id.rsplit(".", 1)[1]) <= declined:
            raise StepFailure("card declined")
        return effect(ctx, "charge", amount=order["amount"])

    payment = await ctx.step(
        "charge",
        charge,
        retries=3,
        backoff="1s",
        compensate=lambda done: effect(ctx, "refund", charge=done["key"]),
    )
    shipment = ctx.spawn("shipping", {"order": ctx.run_id, "sku": order["sku"]})
    shipped, received = await ctx.all(shipment, "received", timeout="7d")
    if shipped is None or received is None:
        return {"outcome": "disputed", "payment": payment["key"]}
    await ctx.sleep("1h")
    await ctx.step("settle", lambda: effect(ctx, "settle", payment=payment["key"]))
    return {"outcome": "settled", "payment": payment["key"]}


@app.workflow("shipping", version="1")
async def shipping(ctx: Context, parcel: dict) -> dict:
    label = await ctx.step("label", lambda: effect(ctx, "label", sku=parcel["sku"]))
    picked = await ctx.wait_signal("picked-up", timeout="2d")
    return {"label": label["key"], "picked_up": picked is not None}
