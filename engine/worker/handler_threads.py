"""The threads a worker runs sync handlers in: one for each attempt it may run.

asyncio's default pool has CPU count + 4 threads: a worker running more attempts than
that would start attempts whose handlers wait for a thread, and time out (unknown)
without ever having run. Here every attempt the worker runs has a thread, and an
attempt's timeout starts when its handler does. A thread cannot be stopped: a handler
that outlives its attempt (timed out, or its lease lost) keeps its thread until it
returns, and ``lingering`` counts those so the worker starts no attempt that would have
to wait for one; ``on_free`` is called when one comes back. Both are logged with how
many of the worker's attempt slots such handlers hold: a worker whose handlers all hang
(a provider that never answers) claims nothing, and holds no lease to show for it.

The threads are the pool's own rather than a ``ThreadPoolExecutor``'s because every
step of every instance crosses here twice. A handler's result reaches the event loop as
one ``call_soon_threadsafe``; through an executor it took a second future chained to
the executor's, a condition variable and a callback on each side, and a hand-off cost
1.6 times the CPU it costs here (issue 23). The threads are daemons: a handler still running
when its worker's process exits has had its attempt ended already (timed out, or
cancelled when the drain ran out), its outcome is unknown whether it runs on or not,
and it does not hold the exit up.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.model.words import counted
from engine.worker.runner import TIMER_GRAIN_SECONDS

if TYPE_CHECKING:
    from engine.worker.activities import ActivityRequest, Handler

log = logging.getLogger("wayline.worker")


class HandlerThreads:
    """Runs sync handlers, each in a thread of its own (see the module)."""

    def __init__(self, size: int, on_free: Callable[[], None] = lambda: None) -> None:
        self.size = size
        self.on_free = on_free
        self.lingering = 0
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._idle: queue.SimpleQueue[None] = queue.SimpleQueue()
        """A token from a thread each time it is free for the next call."""
        self._started = 0
        self._closed = False

    async def run(self, handler: Handler, request: ActivityRequest, timeout: float) -> Any:
        """``handler(request)`` in a thread; TimeoutError ``timeout`` s after it started.

        The handler's thread only notes when it started (``_FromStart``): telling the
        event loop as well would wake it once more per attempt, for no decision."""
        if self._closed:
            raise RuntimeError("the handler threads are closed")
        loop = asyncio.get_running_loop()
        clock = _FromStart(loop, timeout)
        # The handler's thread runs in the caller's context: spans it opens nest under
        # its attempt's (``engine.worker.tracing``), and its logs carry the same ids.
        call = _Call(self, loop, contextvars.copy_context(), handler, request, clock)
        self._calls.put(call)
        try:
            self._idle.get_nowait()  # a free thread takes it
        except queue.Empty:
            if self._started < self.size:
                self._start_thread()
        try:
            async with asyncio.timeout(None) as deadline:
                clock.arm(deadline)
                try:
                    return await call.future
                finally:
                    clock.disarm()
        except BaseException:
            if not call.withdraw() and not call.returned:  # running on: it keeps its thread
                call.lingers = True
                self.lingering += 1
                log.warning(
                    "the handler of attempt %d of step %s of %s still runs after its attempt"
                    " ended: %s, so it runs at most %s at a time until they return",
                    request.attempt,
                    request.step,
                    request.instance_id,
                    self._slots(),
                    counted(self.size - self.lingering, "attempt"),
                )
            raise

    def _slots(self) -> str:
        """How much of the worker such handlers take: the number its log must carry."""
        return (
            f"{self.lingering} of the worker's {self.size} attempt slots are held by such handlers"
        )

    def close(self) -> None:
        """Start no more handlers (those running finish in their threads)."""
        self._closed = True
        for _ in range(self._started):
            self._calls.put(None)

    def _start_thread(self) -> None:
        self._started += 1
        name = f"wayline-handler_{self._started}"
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        """A thread's life: run the calls it takes, until ``close``."""
        while (call := self._calls.get()) is not None:
            if self._closed:
                call.refuse()
            elif call.take():
                call.run()
            self._idle.put(None)

    def _returned(self, call: _Call, value: Any, error: BaseException | None) -> None:
        """On the event loop: ``call``'s handler returned ``value`` or raised ``error``."""
        call.returned = True
        if call.lingers:
            self.lingering -= 1
            log.info(
                "the handler of attempt %d of step %s of %s returned: %s",
                call.request.attempt,
                call.request.step,
                call.request.instance_id,
                self._slots(),
            )
            self.on_free()
        elif call.future.done():  # its caller was cancelled meanwhile
            pass
        elif error is None:
            call.future.set_result(value)
        else:
            call.future.set_exception(error)


@dataclass(eq=False, slots=True)
class _Call:
    """One handler call, from its caller's coroutine to a thread and back.

    A thread ``take``s it unless its caller ``withdraw``s it first (cancelled while it
    waited for a thread); the lock makes that one choice. ``returned`` and ``lingers``
    are read and written on the event loop only."""

    threads: HandlerThreads
    loop: asyncio.AbstractEventLoop
    context: contextvars.Context
    handler: Handler
    request: ActivityRequest
    clock: _FromStart
    future: asyncio.Future[Any] = field(init=False)
    returned: bool = False
    lingers: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _state: str = "waiting"

    def __post_init__(self) -> None:
        self.future = self.loop.create_future()

    def take(self) -> bool:
        """In a thread: whether to run it (it was not withdrawn)."""
        return self._settle("running")

    def withdraw(self) -> bool:
        """Whether it was withdrawn before a thread took it (now or earlier)."""
        return self._settle("withdrawn")

    def _settle(self, state: str) -> bool:
        """Whether it is in ``state`` now: it moves there from waiting, never from the
        other side's state."""
        with self._lock:
            if self._state not in ("waiting", state):
                return False
            self._state = state
            return True

    def refuse(self) -> None:
        """In a thread: cancel its caller, unless it withdrew (the threads were closed)."""
        if self.withdraw():
            with contextlib.suppress(RuntimeError):  # the worker's loop has closed
                self.loop.call_soon_threadsafe(self.future.cancel)

    def run(self) -> None:
        """In a thread: run the handler and hand what it did back to the event loop."""
        self.clock.started = time.monotonic()
        value, error = None, None
        try:
            value = self.context.run(self.handler, self.request)
        except BaseException as exc:  # the caller classifies it (``run_handler``)
            error = exc
        with contextlib.suppress(RuntimeError):  # the worker's loop has closed
            self.loop.call_soon_threadsafe(self.threads._returned, self, value, error)


class _FromStart:
    """Ends a handler's timeout ``timeout`` s after its thread started it.

    The start is known only once it happened, so the deadline is checked when a whole
    ``timeout`` has passed since it was last unknown (the handler cannot time out
    before then), and is then set to the start plus ``timeout``: never early (the loop's
    timers may fire early by up to ``TIMER_GRAIN_SECONDS``, which is added), and late
    only by that grain and the instant between the thread reading the clock and noting
    it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        self.loop = loop
        self.timeout = timeout
        self.started: float | None = None
        """``time.monotonic()`` when the handler started, written by its thread."""
        self._deadline: asyncio.Timeout | None = None
        self._check: asyncio.TimerHandle | None = None

    def arm(self, deadline: asyncio.Timeout) -> None:
        self._deadline = deadline
        self._check = self.loop.call_later(self.timeout, self._expire_when_due)

    def disarm(self) -> None:
        if self._check is not None:
            self._check.cancel()
        self._deadline = None

    def _expire_when_due(self) -> None:
        if self._deadline is None:
            return
        if self.started is None:  # not started yet: it cannot time out within a timeout
            self._check = self.loop.call_later(self.timeout, self._expire_when_due)
            return
        left = self.started + self.timeout - time.monotonic()
        self._deadline.reschedule(self.loop.time() + left + TIMER_GRAIN_SECONDS)
