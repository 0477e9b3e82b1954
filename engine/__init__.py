"""Wayline engine: durable workflows on PostgreSQL.

The pure core (definitions, events, replay, transitions, decisions and the definition
modes) does no I/O, reads no clock and draws no randomness; the store and workers bring
those in. Importing ``engine`` installs the definition modes it runs (``engine.modes``).

What a user imports is here: ``from engine import ActivityRegistry, Client, Store``.
The studio, the drill harness and the command line build on the same names.
"""

from engine.client import Client, SignalConflict, StartConflict
from engine.model.errors import (
    ActivityAppNotFound,
    DecisionRejected,
    DefinitionFileError,
    DefinitionInvalid,
    DefinitionNotFound,
    InputRefused,
    LimitExceeded,
    WaylineError,
)
from engine.model.files import load_definition
from engine.modes import install
from engine.modes.steps import CHOREOGRAPHY, ORCHESTRATION
from engine.store.store import Store
from engine.worker.activities import (
    ActivityFailure,
    ActivityRegistry,
    ActivityRequest,
    UnknownOutcome,
    load_app,
)
from engine.worker.loop import Worker, WorkerConfig

install(ORCHESTRATION, CHOREOGRAPHY)
"""The definition modes this engine runs (``engine.modes``); the first is the default."""

__all__ = [
    "ActivityAppNotFound",
    "ActivityFailure",
    "ActivityRegistry",
    "ActivityRequest",
    "Client",
    "DecisionRejected",
    "DefinitionFileError",
    "DefinitionInvalid",
    "DefinitionNotFound",
    "InputRefused",
    "LimitExceeded",
    "SignalConflict",
    "StartConflict",
    "Store",
    "UnknownOutcome",
    "WaylineError",
    "Worker",
    "WorkerConfig",
    "load_app",
    "load_definition",
]
