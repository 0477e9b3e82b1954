"""Can new code take over running runs? Replay their journals against it and see.

Before a new version of a code workflow is published (or its runs migrated), each
active run of its other versions is replayed against the new code exactly as a worker
would replay it (``driver.drive`` over the run's journal): a run whose journal the new
code reaches command for command is *compatible*; one it departs from is not, with the
driver's message saying where (``journal divergence: expected step 'charge' at
position 3 (event 12), code reached step 'capture'``). Nothing is recorded and no
body runs: bodies are never run by replay, and the code's own commands past the
journal are only looked at. Changed options (retries, timeouts) are not divergence:
history already says what happened.

``judge`` is the code mode's part of the shared compatibility check
(``engine.decide.compatibility``), so its verdicts are in the report every mode gives
(``engine.model.compatibility``).
"""

from __future__ import annotations

from typing import Any

from engine.model.definitions import Definition
from engine.model.instance import Instance
from engine.modes.code.declaration import CodeWorkflow
from engine.modes.code.driver import drive
from engine.modes.code.fold import entries
from engine.modes.code.journal import Diverged

NOT_LOADED = "is not loaded here, so its journal cannot be replayed"
"""The verdict on a run when the target's code was not given; a caller that can load
code (the command line's ``--app``) says after it how to give it."""


def judge(target: Definition, state: Instance, code: Any = None) -> str:
    """'' when ``code`` (the new version's ``CodeWorkflow``) replays ``state``'s
    journal command for command; else the divergence, or that the code is not here."""
    if not isinstance(code, CodeWorkflow) or code.fingerprint != target.fingerprint:
        return f"the code of {target.ref} {NOT_LOADED}"
    advance = drive(code.function, state.value("input"), entries(state), run_id=state.instance_id)
    return advance.message if isinstance(advance, Diverged) else ""
