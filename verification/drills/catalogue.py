"""Every drill of a campaign, by id, with the seed it runs under.

Ids are stable and readable: ``D1-kill-after_handler-s0`` is the first seed of a SIGKILL
at the ``after_handler`` boundary; named drills read ``D4-sigstop``. A drill's seed is
derived from the campaign's master seed and its id, so ``--drill ID --seed MASTER``
reruns exactly that drill.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

from engine.worker.faults import Action, Boundary
from verification.drills import (
    boundaries,
    code,
    failover,
    holds,
    leases,
    machines,
    network,
    operators,
    replay,
    server,
    signals,
    stateful,
    unknowns,
)
from verification.drills.base import DrillEnv, DrillSpec
from verification.profiles import Profile

NAMED = (
    ("D3-client-commit", "unknown COMMIT of a client's start, both ways", signals.client_commit),
    ("D4-sigstop", "stale owner SIGSTOPped past its lease, then SIGCONT", leases.sigstop),
    (
        "D5-blocked-loop",
        "an activity blocks the worker's event loop past the lease",
        leases.blocked_loop,
    ),
    ("D6-concurrent", "the same signal six times at once", signals.concurrent),
    ("D6-cut", "a signal again after its COMMIT answer was cut, both ways", signals.after_cut),
    ("D6-after-end", "signals to an instance that has ended", signals.after_end),
    ("D10-pg-restart", "PostgreSQL stopped -m immediate mid-run and restarted", server.restart),
    ("D11-backend-kill", "a worker's backends terminated mid-run", server.terminate),
    ("D13-partition", "network slowed, then blackholed past the lease", network.partition),
    ("D14-server-pause", "the server SIGSTOPped: every wait needs a deadline", server.pause),
    ("D15-recovery-race", "recovery sweeps and claimers race live workers", leases.races),
    (
        "D16-same-identity",
        "a worker killed and restarted at once under its id",
        leases.same_identity,
    ),
    ("D19-clock-forward", "a worker's wall clock jumps an hour ahead", leases.clock_forward),
    ("D19-clock-back", "a worker's wall clock jumps an hour back", leases.clock_back),
    ("D9-stateful", "hypothesis state machine over starts, signals, crashes", stateful.scenario),
    (
        "U1-renewal-race",
        "outcome answers held back while leases renew: the next step still runs",
        unknowns.renewal_race,
    ),
    (
        "U2-lone-write-cut",
        "outcome writes cut after the server got them: the lease handed on still runs",
        unknowns.lone_write_cut,
    ),
    (
        "U3-thread-pool",
        "three waves of slow sync handlers at once: none times out waiting for a thread",
        unknowns.thread_pool,
    ),
    (
        "U4-cut-before-outcome",
        "outcome writes cut before the server: each is written again, not dropped",
        unknowns.cut_before_outcome,
    ),
    (
        "O1-bulk-under-hold",
        "a hold, then a bulk cancel whose COMMITs are cut while its workers are killed",
        operators.bulk_under_hold,
    ),
    ("D7-replay", "replay every history; mutated definitions must be caught", replay.scenario),
)
OWNED = frozenset({"D10-pg-restart", "D14-server-pause"})
STRANDS = frozenset(
    {
        "D4-sigstop",
        "D5-blocked-loop",
        "D7-replay",
        "D9-stateful",
        "D10-pg-restart",
        "D11-backend-kill",
        "D13-partition",
        "D14-server-pause",
        "D16-same-identity",
        "D19-clock-forward",
        "D19-clock-back",
        "O1-bulk-under-hold",
    }
)
"""Named drills that crash, stop or cut off a worker (or its database), which may leave
an attempt started whose handler never ran: there a false unknown is excused."""
CRASHING_ACTIONS = frozenset({Action.KILL, Action.EXIT, Action.PAUSE})
CRIPPLING_RAISES = frozenset(
    {
        Boundary.AFTER_CLAIM,
        Boundary.AFTER_COMMIT,
        Boundary.AFTER_ATTEMPT_START,
        Boundary.IN_LEASE_RENEWAL,
    }
)
"""Where an injected connection error takes down the worker, the processor between an
attempt's start and its handler, or the renewal of that attempt's lease."""


def strands(boundary: Boundary, action: Action) -> bool:
    """Whether a fault in the matrix may leave a started attempt whose handler never ran."""
    return action in CRASHING_ACTIONS or (action is Action.RAISE and boundary in CRIPPLING_RAISES)


EXCLUSIVE = frozenset({"D10-pg-restart", "D14-server-pause", "D7-replay"})


def drill_seed(master: int, drill_id: str) -> int:
    return int(hashlib.sha256(f"{master}:{drill_id}".encode()).hexdigest()[:8], 16)


def matrix(profile: Profile, master: int) -> list[DrillSpec]:
    """Every boundary x action (where it applies), ``profile.seeds`` times; then the
    cells drilled on an offer's write (``boundaries.OFFERED``), as often."""
    cells = [
        (boundary, action, False)
        for action in Action
        for boundary in Boundary
        if boundaries.applicable(boundary, action)
    ]
    cells += [(boundary, action, True) for boundary, action in boundaries.OFFERED]
    specs = []
    for boundary, action, offered in cells:
        family = boundaries.FAMILY[action]
        where = f"{boundary.value}-offered" if offered else boundary.value
        for n in range(profile.seeds):
            drill_id = f"{family}-{action.value}-{where}-s{n}"
            params = {"boundary": boundary.value, "action": action.value, "offered": offered}
            specs.append(
                DrillSpec(
                    drill_id,
                    family,
                    f"{action.value} at {boundary.value}" + (" taking an offer" if offered else ""),
                    drill_seed(master, drill_id),
                    boundaries.boundary_drill,
                    params=params,
                    strands=strands(boundary, action),
                )
            )
    return specs


def named_family(drill_id: str) -> str:
    """A named drill's family is the first part of its id (``D6`` of ``D6-cut``), but for
    the drills of unknown outcomes (``U1``, ``U2``, ...), which are one family, ``U``."""
    head = drill_id.split("-")[0]
    return "U" if head.startswith("U") else head


def named(master: int) -> list[DrillSpec]:
    return [
        DrillSpec(
            drill_id,
            named_family(drill_id),
            title,
            drill_seed(master, drill_id),
            scenario,
            owned_server=drill_id in OWNED,
            exclusive=drill_id in EXCLUSIVE,
            strands=drill_id in STRANDS,
        )
        for drill_id, title, scenario in NAMED
    ]


MACHINE_FAULTS = (
    ("M1", Boundary.AFTER_CLAIM, Action.KILL, "its claim, before it"),
    ("M1", Boundary.BEFORE_COMMIT, Action.KILL, "its open transaction, during it"),
    ("M1", Boundary.AFTER_COMMIT, Action.KILL, "its commit, after it"),
    ("M3", Boundary.BEFORE_COMMIT, Action.SEVER_BEFORE_COMMIT, "the proxy, unsent"),
    ("M3", Boundary.BEFORE_COMMIT, Action.SEVER_AFTER_COMMIT, "the proxy, once committed"),
    ("M4", Boundary.AFTER_CLAIM, Action.PAUSE, "its claim, before it"),
    ("M4", Boundary.BEFORE_COMMIT, Action.PAUSE, "its open transaction, during it"),
)
"""The machine drills at a worker boundary: before an advance is its claim, during it its
commit's open transaction (the advance's writes made), after it its commit."""
MACHINE_FAULT_TITLES = {
    "M1": "an advance's worker SIGKILLed",
    "M3": "an advance's COMMIT cut",
    "M4": "an advance's worker stopped past its lease",
}
"""Each family's title; a drill's title adds where (`` at ...``), as the matrix's do."""


def machine_drills(profile: Profile, master: int) -> list[DrillSpec]:
    """The machine drills (families M1-M6), ``profile.machine_seeds`` times each."""
    cells = _fault_cells(MACHINE_FAULTS, MACHINE_FAULT_TITLES, machines.boundary_drill)
    submits = ("M2-submits", "concurrent submits for one parent", machines.submits)
    cancels = ("M6-cancels", "duplicate cancels, one during an advance", machines.cancels)
    cells += [(*submits, {}, False), (*cancels, {}, False)]
    return _seeded(cells, profile.machine_seeds, master)


CODE_FAULTS = (
    ("C1", Boundary.AFTER_ATTEMPT_START, Action.KILL, "its durable start, before its body"),
    ("C1", Boundary.AFTER_HANDLER, Action.KILL, "its body's end, its outcome unrecorded"),
    ("C1", Boundary.AFTER_COMMIT, Action.KILL, "a commit, after it"),
    ("C3", Boundary.BEFORE_COMMIT, Action.SEVER_BEFORE_COMMIT, "the proxy, unsent"),
    ("C3", Boundary.BEFORE_COMMIT, Action.SEVER_AFTER_COMMIT, "the proxy, once committed"),
    ("C4", Boundary.AFTER_CLAIM, Action.PAUSE, "its claim, before it"),
    ("C4", Boundary.AFTER_HANDLER, Action.PAUSE, "its body's end, during it"),
)
"""The code-first drills at a worker boundary: before a step is its attempt's durable
start (the body not entered), during it the body's end (its effect made, its outcome
not recorded), after it a commit."""
CODE_FAULT_TITLES = {
    "C1": "a code-first step's worker SIGKILLed",
    "C3": "a code-first run's COMMIT cut",
    "C4": "a code-first step's worker stopped past its lease",
}
"""Each family's title; a drill's title adds where (`` at ...``), as the matrix's do."""
CODE_NAMED = (
    ("C5-duplicate-signals", "a code-first run's signal delivered again and again",
     code.duplicate_signals),
    ("C6-cancels", "duplicate cancels of waiting code-first runs", code.cancels),
    ("C7-divergent-deploy", "a deploy of divergent code while runs wait", code.divergent_deploy),
)  # fmt: skip


def code_drills(profile: Profile, master: int) -> list[DrillSpec]:
    """The code-first drills (families C1-C7), ``profile.code_seeds`` times each."""
    cells = _fault_cells(CODE_FAULTS, CODE_FAULT_TITLES, code.boundary_drill)
    cells += [(name, title, scenario, {}, False) for name, title, scenario in CODE_NAMED]
    return _seeded(cells, profile.code_seeds, master)


def _fault_cells(
    faults: tuple[tuple[str, Boundary, Action, str], ...],
    titles: dict[str, str],
    scenario: Callable[[DrillEnv], Awaitable[None]],
) -> list[tuple[Any, ...]]:
    """The cells of a family table of faults at a worker boundary (``MACHINE_FAULTS``,
    ``CODE_FAULTS``): each run by its workload's ``scenario`` with the boundary and action
    as params, named and titled as the matrix's drills are."""
    return [
        (f"{head}-{action.value}-{boundary.value}", f"{titles[head]} at {where}", scenario,
         {"boundary": boundary.value, "action": action.value}, strands(boundary, action))
        for head, boundary, action, where in faults
    ]  # fmt: skip


HOLD_CELLS = (
    ("H1-crash", "work held across a worker's SIGKILL resumes once after release",
     holds.crash),
    ("H1-expiry", "work held across a stopped worker's lease expiry resumes once",
     holds.expiry),
)  # fmt: skip


def hold_drills(profile: Profile, master: int) -> list[DrillSpec]:
    """The incident-hold drills (family H1), ``profile.hold_seeds`` times each: both take
    a worker out mid-attempt, so they may strand an attempt."""
    cells = [(name, title, scenario, {}, True) for name, title, scenario in HOLD_CELLS]
    return _seeded(cells, profile.hold_seeds, master)


def _seeded(cells: list[tuple[Any, ...]], seeds: int, master: int) -> list[DrillSpec]:
    """Each cell ``(name, title, scenario, params, strands)`` as ``seeds`` drills, each
    seeded from the campaign's master seed and its own id."""
    return [
        DrillSpec(
            f"{name}-s{n}",
            named_family(name),
            title,
            drill_seed(master, f"{name}-s{n}"),
            scenario,
            params=params,
            strands=stranding,
        )
        for name, title, scenario, params, stranding in cells
        for n in range(seeds)
    ]


FAILOVER_CELLS = (
    ("F1-sync", "the primary SIGKILLed mid-commit, its synchronous standby promoted",
     failover.synchronous, failover.synchronous_pair),
    ("F1-async", "an asynchronous standby promoted: acknowledged commits lost (a finding)",
     failover.asynchronous, failover.asynchronous_pair),
)  # fmt: skip
"""The failover drills: each builds its own primary and standby (``servers``)."""


def failover_drills(master: int) -> list[DrillSpec]:
    """The failover drills (family F1), once each in every profile: each builds two
    clusters, which is what takes their time."""
    return [
        DrillSpec(
            name,
            named_family(name),
            title,
            drill_seed(master, name),
            scenario,
            strands=True,
            servers=servers,
        )
        for name, title, scenario, servers in FAILOVER_CELLS
    ]


WORKLOADS = ("flow", "machine", "code")
"""What ``--workload`` chooses: the drills of activity flows (D, U), of state machines
(M) or of code-first workflows (C)."""


def workload_of(spec: DrillSpec) -> str:
    """The workload a drill runs, from its family."""
    return {"M": "machine", "C": "code"}.get(spec.family[:1], "flow")


def catalogue(profile: Profile, master: int, workload: str = "") -> list[DrillSpec]:
    """Every drill of ``profile`` (only ``workload``'s, when given)."""
    if workload and workload not in WORKLOADS:
        raise ValueError(f"workload is one of {', '.join(WORKLOADS)}, not {workload!r}")
    specs = (
        matrix(profile, master)
        + named(master)
        + machine_drills(profile, master)
        + code_drills(profile, master)
        + hold_drills(profile, master)
        + failover_drills(master)
    )
    return [s for s in specs if not workload or workload_of(s) == workload]


def _matches(spec: DrillSpec, wanted: str) -> bool:
    """Whether ``wanted`` names the drill: its id, its family (``D3``) or an id prefix."""
    return spec.id == wanted or spec.family == wanted or spec.id.startswith(f"{wanted}-")


def select(specs: list[DrillSpec], wanted: list[str]) -> list[DrillSpec]:
    """Drills matching any of ``wanted``; a name matching no drill is an error."""
    if not wanted:
        return specs
    chosen = [s for s in specs if any(_matches(s, w) for w in wanted)]
    unknown = [w for w in wanted if not any(_matches(s, w) for s in specs)]
    if unknown:
        raise ValueError(f"no drill matches {', '.join(unknown)}: see `wayline drill list`")
    return chosen
