"""Wayline engine: durable workflows on PostgreSQL.

The pure core (definitions, events, replay, transitions, decisions and the definition
modes) does no I/O, reads no clock and draws no randomness; the store and workers bring
those in. Importing ``engine`` installs the definition modes it runs (``engine.modes``).

What a user imports is here: ``from engine import ActivityRegistry, Client, Store``.
The studio, the drill harness and the command line build on the same names: ``Client``
changes instances, ``Queries`` reads what a console shows, and the store's setup
(``apply_migrations``, ``EmbeddedPostgres``) and errors are named here, so nothing
outside the engine needs ``engine.store``.
"""

from engine.api.bulk_commands import BulkCommands, BulkConflict
from engine.api.client import Client, SignalConflict, StartConflict
from engine.api.executions import (
    AccessRefused,
    ExecutionNotFound,
    Executions,
    SubmitConflict,
    Submitted,
)
from engine.api.queries import Queries
from engine.api.waits import WaitTimedOut
from engine.decide.operator_actions import Action
from engine.model.compatibility import CompatibilityReport, IncompatibleInstances, Verdict
from engine.model.description import describe_instance
from engine.model.errors import (
    ActivityAppNotFound,
    CommandConflict,
    DecisionRejected,
    DefinitionFileError,
    DefinitionInvalid,
    DefinitionNotFound,
    FieldRefused,
    InputRefused,
    LimitExceeded,
    WaylineError,
)
from engine.model.files import load_definition
from engine.model.holds import (
    MAX_RELEASE_COUNT,
    MAX_RELEASE_RATE,
    HoldNotFound,
    HoldReleased,
    HoldScope,
    ReleaseMode,
    parse_scope,
)
from engine.model.instance import AttemptStatus, Instance, InstanceStatus
from engine.model.limits import MAX_WAIT_TIMEOUT
from engine.modes import install
from engine.modes.code.running import CODE_RUNNING
from engine.modes.machines import MACHINE, MachineCall, MachineState, machine, variant
from engine.modes.machines.calls import GrantDenied
from engine.modes.machines.provisioning import provision_roles, provisioning_sql
from engine.modes.machines.provisioning import roles_of as resource_roles
from engine.modes.machines.standing import STATUSES, StateValue
from engine.modes.steps import CHOREOGRAPHY, ORCHESTRATION
from engine.store.catalog import ChildDefinitionNotFound, DefinitionConflict
from engine.store.dead_letters import ResolutionConflict, make_resolution
from engine.store.embedded import EmbeddedPostgres, install_signal_handlers
from engine.store.errors import (
    ActiveExecutionExists,
    CannotConnect,
    CommitUnknown,
    InstanceNotFound,
    StaleLease,
    StoreError,
    StoreUnavailable,
)
from engine.store.leases import WorkRequestInvalid
from engine.store.migrations import (
    DEFAULT_SCHEMA,
    MigrationError,
    SchemaBehindError,
    apply_migrations,
)
from engine.store.store import Store
from engine.worker.activities import (
    ActivityFailure,
    ActivityRegistry,
    ActivityRequest,
    UnknownOutcome,
    load_app,
)
from engine.worker.health import readiness as store_readiness
from engine.worker.loop import Worker, WorkerConfig
from engine.worker.tracing import trace_id_of

install(ORCHESTRATION, CHOREOGRAPHY, MACHINE, CODE_RUNNING)
"""The definition modes this engine runs (``engine.modes``); the first is the default."""

__all__ = [
    "DEFAULT_SCHEMA",
    "MAX_RELEASE_COUNT",
    "MAX_RELEASE_RATE",
    "MAX_WAIT_TIMEOUT",
    "STATUSES",
    "AccessRefused",
    "Action",
    "ActiveExecutionExists",
    "ActivityAppNotFound",
    "ActivityFailure",
    "ActivityRegistry",
    "ActivityRequest",
    "AttemptStatus",
    "BulkCommands",
    "BulkConflict",
    "CannotConnect",
    "ChildDefinitionNotFound",
    "Client",
    "CommandConflict",
    "CommitUnknown",
    "CompatibilityReport",
    "DecisionRejected",
    "DefinitionConflict",
    "DefinitionFileError",
    "DefinitionInvalid",
    "DefinitionNotFound",
    "EmbeddedPostgres",
    "ExecutionNotFound",
    "Executions",
    "FieldRefused",
    "GrantDenied",
    "HoldNotFound",
    "HoldReleased",
    "HoldScope",
    "IncompatibleInstances",
    "InputRefused",
    "Instance",
    "InstanceNotFound",
    "InstanceStatus",
    "LimitExceeded",
    "MachineCall",
    "MachineState",
    "MigrationError",
    "Queries",
    "ReleaseMode",
    "ResolutionConflict",
    "SchemaBehindError",
    "SignalConflict",
    "StaleLease",
    "StartConflict",
    "StateValue",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "SubmitConflict",
    "Submitted",
    "UnknownOutcome",
    "Verdict",
    "WaitTimedOut",
    "WaylineError",
    "WorkRequestInvalid",
    "Worker",
    "WorkerConfig",
    "apply_migrations",
    "describe_instance",
    "install_signal_handlers",
    "load_app",
    "load_definition",
    "machine",
    "make_resolution",
    "parse_scope",
    "provision_roles",
    "provisioning_sql",
    "resource_roles",
    "store_readiness",
    "trace_id_of",
    "variant",
]
