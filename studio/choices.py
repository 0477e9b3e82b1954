"""The closed sets of values the API takes and gives, as ``Literal`` types.

The OpenAPI document lists each set (``enum``), so a script or a fuzzer knows the
allowed values without trying. They are built from the enumerations the engine and the
studio already use, so a new status, action or role reaches the document by itself.
A body field of one of these types that holds anything else is refused with 400 and
its path before the service is asked.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from engine.api.queries import ResolutionAction
from engine.decide.operator_actions import Action
from engine.model.events import EventKind
from engine.model.instance import InstanceStatus
from studio.accounts.account_audit import AccountAction
from studio.instances.action_offers import KINDS, RESOLUTIONS
from studio.instances.service import VIEWS
from studio.roles import Role
from verification.profiles import PROFILES


def one_of(values: Iterable[str]) -> Any:
    """``Literal[...]`` of ``values`` (in their order)."""
    return Literal[tuple(values)]  # type: ignore[misc]


InstanceStatusName = one_of(s.label for s in InstanceStatus)
InstanceView = one_of(VIEWS)
EventKindName = one_of(k.label for k in EventKind)
CommandAction = one_of(a.value for a in KINDS)
"""The operator commands of ``POST /api/instances/{ref}/actions``."""
OutcomeResolution = one_of(RESOLUTIONS)
DeadLetterAction = one_of(a.value for a in ResolutionAction)
RoleName = one_of(r.value for r in Role)
AccountActionName = one_of(a.value for a in AccountAction)
"""What the audit of account actions records (``studio.accounts.account_audit``)."""
DrillProfile = one_of(PROFILES)
DrillJobStatus = Literal["running", "finished", "stopped", "error"]
DrillRunStatus = Literal["running", "passed", "failed", "error", "stopped"]
ActionName = one_of(a.value for a in Action)
"""Any audited action, as the audit trail records it (``migrate`` included)."""
