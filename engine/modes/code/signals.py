"""A code-first run's signals: an inbox, not one slot per step.

Any number of signals of any name may arrive, while the run runs or is paused; each is
recorded once (its id deduplicates: an exact repeat is success, the same id with
another name or payload is a SignalConflict) and waits take them oldest first. One
that no wait takes stays set aside, consumable by a later wait, rather than breaking
replay, because buttons get clicked twice; at most ``MAX_INBOX_SIGNALS`` are kept.
"""

from __future__ import annotations

from typing import Any

from engine.decide import decisions
from engine.model.errors import LimitExceeded, SignalConflict
from engine.model.events import json_data
from engine.model.instance import Instance
from engine.model.transitions import Draft
from engine.modes.code.fold import MAX_INBOX_SIGNALS


def already_received(state: Instance, name: str, signal_id: str, payload: Any) -> bool:
    """Whether the inbox holds signal ``signal_id`` as sent again (an exact repeat, which
    is success); SignalConflict when it holds that id with another name or payload,
    which a repeat would otherwise report as delivered while the new one is lost. A
    person's audited signal (its command id is the signal id) is held to this too."""
    for signal in state.inbox:
        if signal.signal_id == signal_id:
            if signal.name == name and signal.data == json_data(payload):
                return True
            raise SignalConflict(f"signal {signal_id} carried another name or payload")
    return False


def accept_signal(draft: Draft, name: str, signal_id: str, payload: Any) -> tuple[str, ...] | None:
    """Record signal ``signal_id`` named ``name`` in the run's inbox (see the module)."""
    state = draft.state
    assert state is not None
    if already_received(state, name, signal_id, payload):
        return None
    if len(state.inbox) >= MAX_INBOX_SIGNALS:
        raise LimitExceeded(f"{state.instance_id} keeps at most {MAX_INBOX_SIGNALS} signals")
    decisions.accept_signal(draft, name, signal_id, payload)
    return ("signal", signal_id)
