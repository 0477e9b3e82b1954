"""Example request bodies for the OpenAPI document: what a script sends, filled in.

Each names real fields with plausible values, so a reader (or a generated client) sees
a working request; the values are illustrations, not fixtures of any test.
"""

from __future__ import annotations

from typing import Any

from litestar.openapi.spec import Example
from litestar.params import Body


def json_body(summary: str, value: dict[str, Any]) -> Any:
    """A JSON request body described by one example."""
    return Body(examples=[Example(summary=summary, value=value)])


START = json_body(
    "Start an order with an id of your choosing",
    {
        "definition": "order.fulfillment",
        "version": "1",
        "instance_id": "order-7",
        "input": {"order": 7, "items": ["sku-1"]},
    },
)
SIGNAL = json_body(
    "Deliver a payment confirmation once",
    {
        "step": "payment_confirmed",
        "reason": "the bank statement shows the transfer",
        "payload": {"paid": True},
        "signal_id": "pay-7",
    },
)
COMMAND = json_body(
    "Settle an activity outcome in doubt as succeeded",
    {
        "action": "resolve_activity",
        "reason": "the warehouse confirmed the reservation by phone",
        "step": "reserve",
        "resolution": "succeeded",
        "result": {"reservation": "r-19"},
        "command_id": "ops-2026-11-29-1",
    },
)
RESOLVE = json_body(
    "Retry two dead letters in ten minutes",
    {
        "action": "retry",
        "reason": "the payment provider is back",
        "items": [
            {"instance_id": "order-1", "work_id": "acme:order-1#4#activity#charge", "token": 3},
            {"instance_id": "order-2", "work_id": "acme:order-2#2#timer#wait", "token": 1},
        ],
        "retry_in": "10m",
        "deadline_in": "1d",
    },
)
DRILLS = json_body("Run the lease drills under the ci profile", {"drills": ["D1"], "profile": "ci"})
TOKEN = json_body("A token for CI that may publish", {"label": "ci deploys", "role": "author"})
DRAFT_EDIT = json_body(
    "Change a step's timeout",
    {"op": "update", "revision": 4, "index": 0, "fields": {"timeout": "45s"}},
)
SUBMIT = json_body(
    "Submit a document for approval once",
    {"parent": "doc-7", "key": "review-doc-7-r1", "input": "please review v1"},
)
CANCEL = json_body(
    "Cancel an approval that is no longer needed",
    {"reason": "the document was withdrawn", "command_id": "withdraw-doc-7"},
)
BULK_PREVIEW = json_body(
    "What cancelling every running order of version 3 would do",
    {"action": "cancel", "filter": {"definition": "order.fulfillment", "version": "3"}},
)
BULK = json_body(
    "Cancel the previewed orders once, with a reason",
    {
        "bulk_id": "incident-42-cancel",
        "action": "cancel",
        "reason": "incident 42: the payment provider charged twice",
        "instances": ["order-7", "order-8"],
    },
)
HOLD = json_body(
    "Hold version 3 of a definition during an incident",
    {"scope": "definition", "definition": "order.fulfillment@3", "reason": "INC-42: payments"},
)
RELEASE = json_body(
    "Let five held instances resume", {"reason": "INC-42: trying a few", "count": 5}
)
