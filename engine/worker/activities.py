"""Activities: plain Python callables, registered by target name in an explicit registry.

A handler receives an ActivityRequest and either returns a result (success), raises
ActivityFailure (a known failure, retryable or not), or returns UnknownOutcome (it
cannot tell whether its effect happened). A handler that exceeds its timeout or raises
anything else is recorded as *unknown*, never as a clean failure: its effect may have
happened. Handlers may be sync (run in a thread of the worker's own, so they cannot
block the event loop; see ``engine.worker.handler_threads``) or async.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import os
import sys
import sysconfig
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from engine.model.canonical import canonical_json
from engine.model.errors import ActivityAppNotFound, InputRefused
from engine.model.identifiers import code_problem, name_problem
from engine.model.inputs import check_text, check_value
from engine.model.pinned_code import MACHINE_PREFIX, WORKFLOW_PREFIX, parse_pinned, pinned_target
from engine.modes.code.declaration import CodeWorkflow, WorkflowFunction, declare
from engine.worker.runner import TIMER_GRAIN_SECONDS

if TYPE_CHECKING:
    from engine.modes.machines.declaration import Machine

Handler = Callable[["ActivityRequest"], Any]


@dataclass(frozen=True)
class ActivityRequest:
    """What a handler knows about the attempt it runs.

    ``idempotency_key`` is stable across lease redeliveries of one attempt (and across
    ``retry_same_key`` retries): pass it to the external system to deduplicate effects.
    ``compensation`` is True when the handler runs as a compensation.
    """

    instance_id: str
    step: str
    target: str
    attempt: int
    idempotency_key: str
    deadline: datetime
    input: Any
    compensation: bool = False
    results: Mapping[str, Any] = field(default_factory=dict)
    """Results of the instance's activities that have succeeded so far, by step."""


class OutcomeRefused(InputRefused):
    """An ActivityFailure or UnknownOutcome built with a code, flag or details no event
    could carry. Raised where the handler builds it, so its developer learns of it there
    (a worker records such an attempt unknown, as for any other exception, and logs this
    message, which names only what was wrong); the worker could not write it otherwise."""


def check_outcome(what: str, code: object, details: Any, retryable: object = True) -> None:
    """Refuse (OutcomeRefused, saying what is allowed) an outcome ``what`` whose ``code``
    is not one (``code_problem``), whose ``retryable`` is not a bool, or whose
    ``details`` are not JSON (``check_value``)."""
    if problem := code_problem(code):
        raise OutcomeRefused(f"{what}'s code {problem}")
    if not isinstance(retryable, bool):
        raise OutcomeRefused(
            f"{what}'s retryable must be True or False, not {type(retryable).__name__}"
        )
    try:
        check_value(details, f"{what}'s details")
    except InputRefused as refused:
        raise OutcomeRefused(str(refused)) from None


class ActivityFailure(Exception):
    """A known failure: the effect did not happen (``retryable``: trying again may work).
    A code, message, flag or details the engine could not record is OutcomeRefused at
    once."""

    def __init__(
        self, code: str, message: str = "", retryable: bool = True, details: Any = None
    ) -> None:
        check_outcome("ActivityFailure", code, details, retryable)
        try:
            check_text(message, "ActivityFailure's message")
        except InputRefused as refused:
            raise OutcomeRefused(str(refused)) from None
        super().__init__(message or code)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.details = details

    @property
    def recorded(self) -> Any:
        """What its attempt records beside the code: the details given, else the message
        as ``{"message": ...}`` (as a code workflow's failure records its exception's),
        else nothing."""
        if self.details is not None or not self.message:
            return self.details
        return {"message": self.message}


@dataclass(frozen=True)
class UnknownOutcome:
    """Returned by a handler that cannot tell whether its effect happened. A code or
    details the engine could not record is OutcomeRefused at once."""

    code: str = "activity-outcome-unknown"
    details: Any = None

    def __post_init__(self) -> None:
        check_outcome("UnknownOutcome", self.code, self.details)


@dataclass(frozen=True)
class Succeeded:
    result: Any
    data: str | None = field(default=None, compare=False, repr=False)
    """``result``'s canonical JSON once ``recordable`` has checked it: the event's data,
    encoded once rather than again when the outcome is recorded."""


@dataclass(frozen=True)
class Failed:
    code: str
    retryable: bool
    details: Any = None


@dataclass(frozen=True)
class Unknown:
    code: str
    details: Any = None


Outcome = Succeeded | Failed | Unknown
log = logging.getLogger("wayline.activities")
TIMEOUT_CODE = "activity-timeout"
CRASH_CODE = "activity-panic"
TRUNCATED_KEY = "truncated_bytes"
"""In a failure detail too large for its step: the size of the detail the handler gave."""
PREFIX_KEY = "prefix"
"""In a failure detail too large for its step: the start of its canonical JSON text."""
RESULT_TOO_LARGE = "step-result-too-large"
"""A handler's result larger than its step's ``result_limit``: it ran, so unknown."""
RESULT_NOT_JSON = "step-result-not-json"
"""A handler's result that is not JSON (a set, NaN...): it ran, so unknown."""


def bounded_detail(detail: Any, limit: int) -> Any:
    """A failure's detail as the engine records it, within ``limit`` (the step's
    ``result_limit``, which replay enforces on failures too).

    A detail that fits is kept as it is. A larger one is replaced by a marker,
    ``{"prefix": <the start of its canonical JSON>, "truncated_bytes": <its size>}``, cut
    to fit; when not even an empty marker fits, no detail is recorded. The detail is a
    diagnosis, while the outcome is what matters: refusing it would leave a known
    failure to be recorded as unknown once the lease expires.
    """
    if detail is None:
        return None
    text = canonical_json(detail)
    size = len(text.encode())
    if size <= limit:
        return detail
    marker = {PREFIX_KEY: text[:limit], TRUNCATED_KEY: size}  # limit chars >= limit bytes
    over = len(canonical_json(marker).encode()) - limit
    while over > 0 and marker[PREFIX_KEY]:
        # Every character takes at least one byte, escaped or not: cutting ``over`` of
        # them makes it fit unless the prefix runs out first.
        marker[PREFIX_KEY] = marker[PREFIX_KEY][: max(0, len(marker[PREFIX_KEY]) - over)]
        over = len(canonical_json(marker).encode()) - limit
    return marker if over <= 0 else None


def recordable(outcome: Outcome, request: ActivityRequest, limit: int, what: str) -> Outcome:
    """``outcome``, or, for a success whose result is not JSON or is larger than
    ``limit`` (the step's ``result_limit``, never above ``MAX_PAYLOAD_BYTES``), an
    unknown outcome saying so (what in it is not JSON; its size and the limit): the
    handler ran, so its effect may have happened, and an event carrying that result
    could not be written, leaving the attempt to its lease's expiry. The worker's log
    says so too, as for a handler that raised."""
    if not isinstance(outcome, Succeeded) or outcome.result is None:
        return outcome
    try:
        text = canonical_json(outcome.result)
        size = len(text.encode())  # text with a lone surrogate is not UTF-8: ValueError
    except (TypeError, ValueError):
        unknown = not_json(outcome.result, what)
        said = f"returned a result that is not JSON ({unknown.details['message']})"
        _log_unknown(request, said, RESULT_NOT_JSON)
        return unknown
    if larger := too_large(size, limit, what):
        _log_unknown(request, f"returned {size} bytes of JSON", RESULT_TOO_LARGE)
        return larger
    return Succeeded(outcome.result, text)


def not_json(result: Any, what: str) -> Unknown:
    """The unknown outcome of a result the encoder refused, saying what in it is not
    JSON (``check_value``'s words: a type, as "holds a datetime", never a value), which
    its developer could not otherwise tell from the code alone."""
    try:
        check_value(result, f"the {what}'s result")
    except InputRefused as refused:
        message = str(refused)
    else:  # a cycle the encoder found
        message = f"the {what}'s result is not JSON"
    return Unknown(RESULT_NOT_JSON, {"message": message})


def too_large(size: int, limit: int, what: str) -> Unknown | None:
    """The unknown outcome of a result whose canonical JSON is ``size`` bytes of UTF-8,
    more than ``limit`` (saying its size and the limit), else None."""
    if size <= limit:
        return None
    message = f"the {what} returned {size} bytes of JSON; at most {limit} can be recorded"
    return Unknown(RESULT_TOO_LARGE, {"message": message})


class ActivityRegistry:
    """Maps activity targets to handlers, and the names and versions of state machines
    and code workflows to their code (``engine.model.pinned_code``: their work names
    the version it runs). Build one explicitly; nothing registers itself."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        self._machines: dict[tuple[str, str], Machine] = {}
        self._workflows: dict[tuple[str, str], CodeWorkflow] = {}

    def workflow(
        self, name: str, *, version: str
    ) -> Callable[[WorkflowFunction], WorkflowFunction]:
        """Declare the decorated ``async def f(ctx, input)`` as code workflow
        ``name@version`` run here; the function is returned as it is. A name and
        version declared twice is a ValueError: a version is one piece of code."""

        def decorate(function: WorkflowFunction) -> WorkflowFunction:
            if (name, version) in self._workflows:
                raise ValueError(f"workflow {name}@{version} is declared twice")
            self._workflows[(name, version)] = declare(name, version, function)
            return function

        return decorate

    def workflow_for(self, name: str, version: str) -> CodeWorkflow | None:
        """The code workflow declared as ``name@version``, if any."""
        return self._workflows.get((name, version))

    def workflow_at(self, target: str) -> CodeWorkflow | None:
        """The code workflow whose work names ``target`` (``workflow:<name>@<version>``)."""
        pinned = parse_pinned(target, WORKFLOW_PREFIX)
        return None if pinned is None else self.workflow_for(*pinned)

    def runs(self, target: str) -> bool:
        """Whether this worker runs work that names ``target``: an activity's, a code
        workflow's (its steps and decisions) or a machine's."""
        return target in self._handlers or any(
            found is not None for found in (self.workflow_at(target), self.machine_for(target))
        )

    @property
    def workflows(self) -> list[CodeWorkflow]:
        """Every code workflow declared here, in declaration order."""
        return list(self._workflows.values())

    def machine(self, flow: Machine) -> Machine:
        """Run ``flow``'s advance (and compensation) here: this worker claims the work
        of executions pinned to its version (``machine:<name>@<version>``). Its advance
        must be registered (``@flow.advance``) first; several versions of one machine
        may each be registered, once."""
        manifest, ref = flow.definition.manifest, flow.definition.ref
        if flow.advance_function is None:
            raise ValueError(f"{ref} has no advance: decorate one with @advance")
        if manifest.compensation is not None and flow.compensation_function is None:
            raise ValueError(
                f"{ref} declares compensation {manifest.compensation}: decorate it with @compensate"
            )
        if self._machines.get((ref.name, ref.version), flow) is not flow:
            raise ValueError(f"machine {ref} is registered twice")
        self._machines[(ref.name, ref.version)] = flow
        return flow

    def machine_for(self, target: str) -> Machine | None:
        """The machine whose executions' work names ``target``
        (``machine:<name>@<version>``), if this worker runs it."""
        pinned = parse_pinned(target, MACHINE_PREFIX)
        return None if pinned is None else self._machines.get(pinned)

    @property
    def machines(self) -> list[Machine]:
        """Every machine whose code this worker runs, each version once."""
        return list(self._machines.values())

    def register(self, target: str, handler: Handler) -> None:
        """Run ``handler`` for the work that names ``target``. A target that is not a
        name, or taken, and a handler that cannot be called with the request alone, are
        a ValueError here: called by a worker, it would fail before its first line and
        its attempt be recorded unknown as if it might have run."""
        problem = name_problem(target)
        if problem:
            raise ValueError(f"activity target {problem}")
        if problem := handler_problem(handler):
            raise ValueError(f"activity target {target}: {problem}")
        if target in self._handlers:
            raise ValueError(f"activity target {target} is registered twice")
        self._handlers[target] = handler

    def activity(self, target: str) -> Callable[[Handler], Handler]:
        """Decorator form of ``register`` (on this registry object, not a global one)."""

        def decorate(handler: Handler) -> Handler:
            self.register(target, handler)
            return handler

        return decorate

    def get(self, target: str) -> Handler | None:
        return self._handlers.get(target)

    @classmethod
    def combined(cls, *apps: ActivityRegistry) -> ActivityRegistry:
        """One registry that runs everything ``apps`` run, for a worker that serves
        several apps (the studio's, for the examples); a target, machine or workflow
        that two of them declare is a ValueError, as it is within one app."""
        merged = cls()
        for app in apps:
            for target, handler in app._handlers.items():
                merged.register(target, handler)
            for flow in app.machines:
                merged.machine(flow)
            for key, code in app._workflows.items():
                if key in merged._workflows:
                    raise ValueError(f"workflow {code} is declared twice")
                merged._workflows[key] = code
        return merged

    @property
    def targets(self) -> list[str]:
        """Every target this worker runs: activities', and its machines' and code
        workflows' versions (``machine:<name>@<version>``, ``workflow:<name>@<version>``)."""
        code = [pinned_target(WORKFLOW_PREFIX, flow.ref) for flow in self._workflows.values()]
        machines = [pinned_target(MACHINE_PREFIX, m.definition.ref) for m in self.machines]
        return sorted([*self._handlers, *machines, *code])

    def __iter__(self) -> Iterator[str]:
        return iter(self.targets)


def handler_problem(handler: object) -> str | None:
    """Why ``handler`` cannot be called as ``handler(request)``, or None: not callable,
    or a signature that needs more or fewer arguments. A callable whose signature
    Python cannot read (some builtins) is taken as it is."""
    if not callable(handler):
        return f"the handler is a {type(handler).__name__}, not a function taking the request"
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(None)
    except TypeError:
        name = getattr(handler, "__name__", type(handler).__name__)
        return (
            f"handler {name}{signature} cannot be called with one argument: a handler "
            f"takes the ActivityRequest, as in def {name}(request)"
        )
    return None


def load_app(spec: str) -> ActivityRegistry:
    """Import ``MODULE:NAME`` and return the ActivityRegistry it names.

    The module is imported from the working directory too, as other app runners do, so
    ``wayline worker --app myapp:app`` finds ``myapp.py`` where it runs. Raises
    ActivityAppNotFound, saying what was wrong, never with the import's traceback.
    """
    module_name, _, attribute = spec.partition(":")
    parts = module_name.split(".")
    if parts[-1] == "py" or not all(part.isidentifier() for part in (*parts, attribute)):
        raise ActivityAppNotFound(
            "--app must look like MODULE:REGISTRY, a module as Python imports it and a "
            "name in it, e.g. examples.orders:app (not a file path)"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        problem = _import_problem(module_name, exc)
        raise ActivityAppNotFound(f"cannot load {spec}: {problem}") from None
    except Exception as exc:  # the module's own code failed as it was imported
        problem = _failed_import(module_name, exc)
        raise ActivityAppNotFound(f"cannot load {spec}: {problem}") from None
    registry = getattr(module, attribute, _MISSING)
    if isinstance(registry, ActivityRegistry):
        return registry
    if registry is _MISSING:
        problem = f"{module_name} has no {attribute}"
    else:
        problem = f"{attribute} is a {type(registry).__name__}, not an ActivityRegistry"
    raise ActivityAppNotFound(
        f"cannot load {spec}: {problem}; {_registries_in(module_name, module)}"
    )


_MISSING = object()


def _registries_in(module_name: str, module: object) -> str:
    """What ``--app`` could name in ``module`` instead: its ActivityRegistry objects (a
    typo, or the name of the module's function or class), or how to build one."""
    names = [name for name, value in vars(module).items() if isinstance(value, ActivityRegistry)]
    if not names:
        return f"{module_name} holds no ActivityRegistry: build one (app = ActivityRegistry())"
    return f"the ActivityRegistry in {module_name} is {' or '.join(names)}"


def _import_problem(module_name: str, exc: ImportError) -> str:
    """Why ``module_name`` did not import, in words: missing itself (the usual mistake,
    a command run from another directory), or missing something it imports."""
    missing = getattr(exc, "name", None)
    if missing is None or not isinstance(exc, ModuleNotFoundError):
        return type(exc).__name__
    if module_name == missing or module_name.startswith(f"{missing}."):
        return f"no module {missing} in the working directory ({os.getcwd()}) or on PYTHONPATH"
    return f"it imports {missing}, which is not installed"


def _failed_import(module_name: str, exc: Exception) -> str:
    """Where importing ``module_name`` failed, in one line: a syntax error with its file,
    line and the compiler's words; a declaration the engine refused (a workflow declared
    twice, a bad machine) in the engine's words, which are written to be shown; any other
    exception by its type and the line that raised it, never its text, which may quote a
    secret or an input."""
    if isinstance(exc, SyntaxError):
        where = f"{os.path.basename(exc.filename or '?')} line {exc.lineno}"
        return f"{module_name} has a syntax error at {where}: {exc.msg}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames and frames[-1].filename.startswith(_ENGINE_DIR):
        outside = [f for f in frames if not f.filename.startswith(_ENGINE_DIR)]
        return f"{module_name}{_where(outside)}: {exc}"
    return f"importing {module_name} raised {type(exc).__name__}{_where(_own(frames))}"


def _where(frames: list[traceback.FrameSummary]) -> str:
    """`` at FILE line N`` of the innermost of ``frames`` ('' when there are none)."""
    if not frames:
        return ""
    return f" at {os.path.basename(frames[-1].filename)} line {frames[-1].lineno}"


_ENGINE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
"""The engine's package directory: an exception raised in it is the engine's refusal."""
_NOT_THE_TEAMS = (_ENGINE_DIR, "<", os.path.join(sysconfig.get_paths()["stdlib"], ""))
"""Where a frame is none of a team's own lines: the engine's, code Python generated (a
dataclass's ``__init__``, ``<frozen os>``) and the standard library's. A handler's or an
app's failure names its innermost line elsewhere: the line of the team's code that
called into them."""


def _own(frames: list[traceback.FrameSummary]) -> list[traceback.FrameSummary]:
    """The frames of the team's own code (all of them when none is)."""
    return [f for f in frames if not f.filename.startswith(_NOT_THE_TEAMS)] or frames


def _log_unknown(request: ActivityRequest, what: str, code: str) -> None:
    """Say in the worker's log that a handler ended without an outcome, which its
    history records only as ``code``: where it raised is what its developer needs. Not
    the exception's text, which may quote an input or a secret (``engine.worker.logs``)."""
    log.warning(
        "activity %s %s: attempt %d of step %s of %s is recorded unknown (%s)",
        request.target,
        what,
        request.attempt,
        request.step,
        request.instance_id,
        code,
    )


class HandlerExecutor(Protocol):
    """Runs a sync handler: ``HandlerThreads`` (``engine.worker.handler_threads``), unless a
    worker's hooks choose another."""

    async def run(self, handler: Handler, request: ActivityRequest, timeout: float) -> Any:
        """``handler(request)``; TimeoutError ``timeout`` s after it started."""


def is_async_handler(handler: Handler) -> bool:
    """Whether ``handler(request)`` returns a coroutine: an ``async def`` (or a partial of
    one), or an object whose ``__call__`` is one, which ``inspect.iscoroutinefunction``
    does not see. Run in a thread, such a handler would only build its coroutine, and
    its attempt be recorded unknown although none of its code ran."""
    call = type(handler).__call__  # a function's is a slot wrapper: not a coroutine one
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


async def run_handler(
    handler: Handler, request: ActivityRequest, timeout: float, executor: HandlerExecutor
) -> Outcome:
    """Run one attempt and classify what happened; never raises for handler behaviour.

    A sync handler runs by ``executor``; its timeout counts from when it started."""
    try:
        if is_async_handler(handler):
            async with asyncio.timeout(timeout + TIMER_GRAIN_SECONDS):
                value = await handler(request)
        else:
            value = await executor.run(handler, request, timeout)
    except ActivityFailure as failure:
        return Failed(failure.code, failure.retryable, failure.recorded)
    except TimeoutError:
        _log_unknown(request, f"did not finish within its timeout of {timeout:g} s", TIMEOUT_CODE)
        return Unknown(TIMEOUT_CODE)
    except asyncio.CancelledError:
        raise
    except (Exception, SystemExit) as exc:  # the effect may have happened: unknown
        # SystemExit too: a handler's sys.exit() (a CLI library's, say) ends its attempt,
        # not the worker and every other attempt it runs.
        raised = (
            f"raised {type(exc).__name__}{_where(_own(traceback.extract_tb(exc.__traceback__)))}"
        )
        if isinstance(exc, OutcomeRefused):  # the engine's words, which quote nothing
            raised = f"{raised} ({exc})"
        _log_unknown(request, raised, CRASH_CODE)
        return Unknown(CRASH_CODE, {"error": type(exc).__name__})
    if isinstance(value, UnknownOutcome):
        return Unknown(value.code, value.details)
    return Succeeded(value)
