"""Every bound the engine enforces, in one place.

Each limit is checked before anything is allocated or written, and every error that
names a limit says what was wrong and what is allowed. Values follow the reference
model (go-workflow §a.14) unless a docstring below says why we differ.
"""

from datetime import timedelta

KIB = 1024
MIB = 1024 * KIB

MAX_PAYLOAD_BYTES = 16 * MIB
"""Any single input, result, event data or work payload."""

MAX_STEPS = 10_000
"""Steps per definition; also the largest fan-out of a parallel or race."""

MAX_FAN_OUT = 10_000

MAX_IDENTIFIER_LENGTH = 200
"""Names, versions, instance ids, step names, targets, keys, actors."""

MAX_KEY_LENGTH = 512
"""Derived identities: idempotency keys, child instance ids, work and transition ids."""

MAX_CODE_LENGTH = 200
"""Failure and resolution codes on events (short machine-readable words)."""

MAX_REASON_LENGTH = 500
"""Operator reasons; the whole audit record must still fit MAX_OPERATOR_AUDIT_BYTES."""

MAX_OPERATOR_AUDIT_BYTES = 1 * KIB

MAX_FAILURE_DETAIL_LENGTH = 2_000
"""A dead letter's ``failure_detail`` (a code workflow's divergence message), in characters."""

MAX_DISPATCH_BYTES = 1 * KIB
"""Activity, child and compensation work payloads (a small JSON dispatch)."""

MAX_TRANSITION_EVENTS = 100
MAX_TRANSITION_WORK = 1_000
MAX_TRANSITION_BYTES = 16 * MIB
"""Sum of event data and work payloads in one transition."""

MAX_RETRY_ATTEMPTS = 1_000
MAX_STEP_TIMEOUT = timedelta(days=365)
"""Activity, signal, approval, child and compensation timeouts, and timer durations."""

MAX_RETRY_DELAY = timedelta(days=30)

MAX_RETRY_IN = MAX_RETRY_DELAY
"""The latest a retried dead letter is due again: as late as a step's retry may be."""
MAX_DEADLINE_IN = MAX_STEP_TIMEOUT
"""The longest a retried dead letter may then run before it is dead again: as long as
a step's timeout may be."""
DEFAULT_RETRY_IN = timedelta(0)
"""When a retried dead letter is due unless its operator says: at once (whoever
retries it has mended what made it fail)."""
DEFAULT_DEADLINE_IN = timedelta(days=1)
"""How long after its retry a readmitted dead letter may take, unless its operator
says, before it is dead again."""

MAX_WORK_CLAIM_ITEMS = 100
MAX_LEASE_DURATION = timedelta(minutes=15)
MIN_LEASE_DURATION = timedelta(seconds=1)
"""The shortest lease a worker takes: it renews every third of it, and below a second a
slow commit or a pause of the process would lose leases whose handlers still run (their
attempts then recorded unknown and retried elsewhere)."""
MAX_WORKER_CONCURRENCY = 1_000
MAX_WORKER_POLL_INTERVAL = timedelta(minutes=1)
MIN_WORKER_POLL_INTERVAL = timedelta(milliseconds=10)
"""The shortest look for due work a worker takes when no notification wakes it: below
it an idle worker would ask the database thousands of times a second for nothing."""
MAX_WORKER_DRAIN = timedelta(minutes=15)
"""The longest a stopping worker waits for its attempts in flight: as long as a lease may
last (an attempt still running then is abandoned and recovered as unknown)."""

MAX_PAGE_ITEMS = 100
"""Instance lists and dead-letter pages."""

MAX_HISTORY_PAGE_EVENTS = 1_000
MAX_INSPECTION_HISTORY_EVENTS = 100_000

MAX_SEQUENCE = 2**63 - 1
"""PostgreSQL bigint."""

MAX_ATTEMPT = 2**32 - 1

WORK_CLAIM_WINDOW = timedelta(days=1)
"""How long due work may wait for a worker beyond its own timeout before its deadline
passes and it becomes a dead letter (code ``deadline-exceeded``) instead of running late."""

MAX_JSON_DEPTH = 100
"""Arrays and objects nested inside each other in any JSON value from outside (inputs,
payloads, results, evidence, definition documents). Real payloads are a few levels
deep; the bound keeps parsing, canonical encoding and replay far from Python's
recursion limit, and is the default nesting limit of common JSON parsers (Ruby's)."""

# State machines (``engine.modes.machines``): the seed's bounds (seed 000), then ours.

MAX_MACHINE_TIMER_SECONDS = 86_400
"""A timer state waits 1 second to 1 day before its next advance (seed 000)."""

MAX_MACHINE_ATTEMPTS = 8
"""Advance attempts of one state before the execution is dead (seed 000)."""

MAX_MACHINE_TRANSITIONS = 256
"""States entered by one execution before it is dead (seed 000)."""

MAX_MACHINE_STATES = 256
"""Variants of one state family: no walk can enter more states than that anyway."""

MAX_STATE_FIELDS = 64
"""Fields of one state variant."""

MAX_MACHINE_GRANTS = 32
"""Database grants one machine declares."""

MAX_STATE_BYTES = 64 * KIB
"""The canonical JSON of one state's fields (the seed's encoded-value ceiling)."""

ADVANCE_TIMEOUT = timedelta(seconds=4)
"""How long one advance (or compensation) of a state machine may run. It runs inside
the transaction that records its new state, which the server ends when it is idle for
``IDLE_IN_TRANSACTION_TIMEOUT_MS`` (5 s): the advance must give up first."""
ADVANCE_BACKOFF_FIRST = timedelta(seconds=1)
ADVANCE_BACKOFF_MAX = timedelta(minutes=1)
"""A failed advance is tried again after 1 s, doubling with each failure, at most 1 min."""
MAX_COMPENSATION_TEXT_BYTES = 4 * KIB
"""The text a machine's compensation returns is recorded up to this size."""

MAX_BULK_INSTANCES = 100
"""Instances one bulk operator action previews or acts on per request: each is replayed
and judged, so a request stays bounded; a wider selection is narrowed or done in parts."""

MAX_WAIT_TIMEOUT = timedelta(days=1)
"""The longest one ``Client.wait`` for an instance's end may last: a caller that waits
longer waits again (the instance is read anew each time, nothing is lost)."""
MIN_RETENTION_KEEP = timedelta(hours=1)
"""The shortest a team's retention policy keeps ended instances: a shorter keep (``1ms``
was accepted) removes an instance at the next run after it ends, before an operator or
a caller waiting on its result could read it."""
MAX_RETENTION_KEEP = timedelta(days=36_500)
"""The longest a team's retention policy keeps ended instances (100 years): longer is
for ever in practice, and a cutoff further back than the calendar goes cannot be
computed."""
