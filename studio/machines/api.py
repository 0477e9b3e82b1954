"""``/api/machines/{name}/executions``: submit an execution of a state machine, read its
state and status, cancel it (the host operations of ``engine.Executions``).

``ref`` is the execution id with each ``/`` written as ``~`` (``studio.instance_urls``),
as on the instance routes; the execution is also an instance, which the instance
routes and pages show like any other.
"""

from __future__ import annotations

from typing import Annotated

from litestar import Response
from litestar.di import NamedDependency
from litestar.params import FromPath

from studio import api_examples as examples
from studio.instance_urls import instance_id_of
from studio.machines import service as machines
from studio.machines.schemas import CancelIn, ExecutionOut, StateOut, StatusOut, SubmitIn
from studio.principal import Principal
from studio.runtime import Runtime


async def submit(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    data: Annotated[SubmitIn, examples.SUBMIT],
) -> Response[ExecutionOut]:
    """Submit an execution (201 when new, 200 when an identical submit made it; 409 for
    the key with other content or a parent with an active execution)."""
    submitted, status = await machines.submit(
        runtime, principal, name, data.parent, data.input, data.key, data.version
    )
    ref = submitted.instance.definition
    out = ExecutionOut(submitted.execution_id, ref.name, ref.version, submitted.created, status)
    return Response(out, status_code=201 if submitted.created else 200)


async def get_state(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    ref: FromPath[str],
) -> StateOut:
    """The execution's current state: its variant and fields (the submitter only)."""
    value = await machines.state(runtime, principal, name, instance_id_of(ref))
    return StateOut(value.variant, value.fields)


async def get_status(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    ref: FromPath[str],
) -> StatusOut:
    """One of running, waiting, paused, cancelling, completed, cancelled, dead."""
    return StatusOut(await machines.status(runtime, principal, name, instance_id_of(ref)))


async def cancel(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    name: FromPath[str],
    ref: FromPath[str],
    data: Annotated[CancelIn, examples.CANCEL],
) -> StatusOut:
    """The audited cancel, by the submitter; the status after it."""
    execution = instance_id_of(ref)
    status = await machines.cancel(
        runtime, principal, name, execution, data.reason, data.command_id
    )
    return StatusOut(status)
