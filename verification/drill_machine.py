"""The state machine drills run: every advance writes one application row, scripted
by the harness.

``drill.machine`` counts: from ``Begun`` each advance enters ``Counted(n)`` (``n`` the
transitions so far) until ``Finished(steps)``, where ``steps`` is the execution's input;
an input of 0 makes it rest instead (``Resting``, a timer state an hour long, for a
cancellation to find). Each advance and the compensation write one row of
``drill_machine_writes`` through ``MachineCall.execute``, in the transaction that
records the state they return, together with that transaction's id: the checker
(``verification.machine_checks``) holds the rows against history, one row per recorded
state and in its transaction, none without one.

The harness scripts an advance by a row of ``drill_machine_script`` for the execution
and the transition it would make: ``fail`` raises after its write (once per attempt
below ``attempts``), ``hold`` marks its entry in ``drill_machine_entries`` (on a
connection of its own, committed at once, as the harness's observation) and then waits,
inside its transaction and after its write, until the harness releases it
(``released``) or its time runs out.

Its grants are ``DbRead<DrillRows>`` and ``DbWrite<DrillRows>``, so its code acts as
``wayline_drillrows_write``, which may read the script and write the rows
(``MACHINE_PRIVILEGES``), and nothing else.
"""

from __future__ import annotations

import asyncio
import os

import psycopg

from engine import MachineCall, MachineState, machine, resource_roles, variant
from verification.effects import LEDGER_DSN_ENV

MACHINE = "drill.machine"
REST_SECONDS = 3600
HOLD_POLL_SECONDS = 0.02
MACHINE_TABLES = """
CREATE TABLE IF NOT EXISTS drill_machine_writes (
    execution   text NOT NULL,
    transitions integer NOT NULL,
    compensation boolean NOT NULL,
    attempt     integer NOT NULL,
    xact_id     xid8 NOT NULL,
    pid         integer NOT NULL
);
CREATE TABLE IF NOT EXISTS drill_machine_script (
    execution   text NOT NULL,
    transitions integer NOT NULL,
    action      text NOT NULL,
    attempts    integer NOT NULL DEFAULT 1,
    released    boolean NOT NULL DEFAULT false,
    PRIMARY KEY (execution, transitions)
);
CREATE TABLE IF NOT EXISTS drill_machine_entries (
    execution   text NOT NULL,
    transitions integer NOT NULL,
    attempt     integer NOT NULL,
    pid         integer NOT NULL
);
"""
"""Non-unique on purpose: a write committed twice for one transition must be seen."""

WRITE = """
INSERT INTO drill_machine_writes (execution, transitions, compensation, attempt, xact_id, pid)
VALUES (%s, %s, %s, %s, pg_current_xact_id(), %s)
"""
SCRIPT = """
SELECT action, attempts, released FROM drill_machine_script
WHERE execution = %s AND transitions = %s
"""
RESOURCE = "DrillRows"
ROLES = resource_roles(RESOURCE)
MACHINE_PRIVILEGES = f"""
DO $$ BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO {ROLES.read}', current_schema());
END $$;
GRANT SELECT ON drill_machine_script, drill_machine_writes TO {ROLES.read};
GRANT INSERT ON drill_machine_writes TO {ROLES.write};
"""
"""What the drill machine's roles may do with ``MACHINE_TABLES`` (in the drill's schema)."""
ENTRY = """
INSERT INTO drill_machine_entries (execution, transitions, attempt, pid) VALUES (%s, %s, %s, %s)
"""


class Tally(MachineState):
    """How far a drill execution has counted."""


@variant
class Begun(Tally):
    pass


@variant
class Counted(Tally):
    n: int


@variant
class Resting(Tally):
    n: int


@variant
class Finished(Tally):
    n: int


flow = machine(
    MACHINE,
    version="1",
    function="drill.machine.advance",
    state=Tally,
    input=int,
    initial=Begun,
    terminal=[Finished],
    timers={Resting: REST_SECONDS},
    transitions={
        Begun: [Counted, Resting, Finished],
        Counted: [Counted, Finished],
        Resting: [Finished],
    },
    compensation="drill.machine.compensate",
    grants=[f"DbRead<{RESOURCE}>", f"DbWrite<{RESOURCE}>"],
    resource=RESOURCE,
    max_attempts=4,
    max_transitions=16,
    retry="transactional",
    concurrency="parent",
)


def counted(state: Tally) -> int:
    """The transitions an execution in ``state`` has made."""
    return getattr(state, "n", 0)


@flow.advance
async def advance(call: MachineCall) -> Tally:
    """One more: write this transition's row, then enter the next state."""
    n = counted(call.state) + 1
    await _write(call, n, compensation=False)
    await _scripted(call, n)
    if call.input == 0 and isinstance(call.state, Begun):
        return Resting(n)
    return Finished(n) if n >= call.input else Counted(n)


@flow.compensate
async def compensate(call: MachineCall) -> str:
    """A cancelled execution writes one row for its compensation."""
    await _write(call, counted(call.state), compensation=True)
    return f"{call.execution_id} compensated after {counted(call.state)}"


async def _write(call: MachineCall, n: int, compensation: bool) -> None:
    params = [call.execution_id, n, compensation, call.attempt, os.getpid()]
    await call.execute(WRITE, params)


async def _scripted(call: MachineCall, n: int) -> None:
    rows = await call.execute(SCRIPT, [call.execution_id, n])
    if not rows:
        return
    action, attempts, _ = rows[0]
    if action == "fail" and call.attempt <= attempts:
        raise RuntimeError(f"scripted failure of attempt {call.attempt}")
    if action == "hold":
        await _hold(call, n)


async def _hold(call: MachineCall, n: int) -> None:
    """Tell the harness this advance is in flight, then wait (in the transaction) until
    it is released; the advance's own timeout bounds the wait."""
    async with await psycopg.AsyncConnection.connect(
        os.environ[LEDGER_DSN_ENV], autocommit=True
    ) as conn:
        await conn.execute(ENTRY, [call.execution_id, n, call.attempt, os.getpid()])
    while not (await call.execute(SCRIPT, [call.execution_id, n]))[0][2]:
        await asyncio.sleep(HOLD_POLL_SECONDS)
