"""What each drill family tests, and the order the Drills page lists them in.

The catalogue (``verification.drills.catalogue``) names families by id and its matrix
families' drills by action and boundary only (``kill at after_claim``), so a family
needs one sentence of its own. The order is the reading order: the engine's fault
families by number (D1, D2, ..., D19), failover (F), then unknown outcomes (U),
operations (O), holds (H), state machines (M), code-first runs (C) and drill plans (P).
"""

from __future__ import annotations

import re

ABOUT = {
    "D1": "A worker killed (SIGKILL) or exiting at each persistence boundary: another "
    "worker takes its work over and nothing is lost or done twice.",
    "D2": "A worker's code raising an error at each persistence boundary.",
    "D3": "A COMMIT's answer cut at a proxy, before or after the server got it, at each "
    "boundary: the engine settles whether it committed.",
    "D4": "A worker stopped (SIGSTOP) past its lease at each boundary and resumed after "
    "a takeover: its stale writes are refused.",
    "D5": "An activity blocks the worker's event loop past its lease.",
    "D6": "Signals delivered many times at once, again after a cut answer, or to an "
    "instance that has ended: each is taken at most once.",
    "D7": "Every recorded history replayed; mutated definitions must be caught.",
    "D9": "A property-based state machine over starts, signals and crashes.",
    "D10": "PostgreSQL stopped (-m immediate) mid-run and restarted.",
    "D11": "A worker's server backends terminated mid-run.",
    "D13": "The network slowed, then blackholed past the lease.",
    "D14": "The server paused (SIGSTOP): every wait needs a deadline.",
    "D15": "Recovery sweeps and claimers race live workers.",
    "D16": "A worker killed and restarted at once under the same id.",
    "D19": "A worker's wall clock jumps an hour ahead or back.",
    "F1": "The primary SIGKILLed mid-commit and its standby promoted: with a synchronous "
    "standby, workers follow the multi-host connection string, every lost answer is "
    "settled and nothing acknowledged is lost; an asynchronous standby loses acknowledged "
    "commits (reported as a finding).",
    "U": "Unknown outcomes: outcome answers held back or cut while leases renew; a "
    "handler that never ran is never called unknown.",
    "O1": "An incident: a definition held, then a bulk cancel whose COMMITs are cut while "
    "its workers are killed, then a gradual release: every instance gets one result.",
    "H1": "An incident hold across a worker killed or stopped past its lease: nothing is "
    "claimed while held, and everything resumes exactly once after a gradual release.",
    "M1": "A state machine's worker killed before, during and after an advance.",
    "M2": "Concurrent submits for one parent: exactly one execution is admitted.",
    "M3": "An advance's COMMIT cut at the proxy, before and after the server got it.",
    "M4": "A state machine's worker stopped past its lease and resumed after a takeover.",
    "M6": "Duplicate cancels of an execution, one while its advance is in flight.",
    "C1": "A code-first step's worker killed at its start, its body's end and its commit.",
    "C3": "A code-first run's COMMIT cut at the proxy, before and after the server got it.",
    "C4": "A code-first step's worker stopped past its lease and resumed after a takeover.",
    "C5": "A code-first run's signal delivered again and again.",
    "C6": "Duplicate cancels of waiting code-first runs.",
    "C7": "A deploy of divergent code while runs wait.",
    "P": "A drill plan: one drill with every pin of a plan file.",
}
"""One sentence per family: what breaks and what must still hold."""
GROUPS = "DFUOHMCP"
"""Family letters in reading order (any other letter comes after them)."""
FAMILY_ID = re.compile(r"([A-Z]+)(\d*)")


def about(family: str, fallback: str) -> str:
    """What ``family`` tests (``fallback``, its first drill's title, for a family this
    table does not know yet; tests/studio keep every catalogued family known)."""
    return ABOUT.get(family, fallback)


def order(family: str) -> tuple[int, str, int]:
    """Sort key: by letter group, then by number (D2 before D10)."""
    found = FAMILY_ID.fullmatch(family)
    letters, number = (found.group(1), found.group(2)) if found else (family, "")
    group = GROUPS.find(letters[:1])
    return (group if group >= 0 else len(GROUPS), letters, int(number or 0))
