"""Group commit: the commits of one worker's processors share PostgreSQL transactions.

Each processor still commits its own transitions fenced by its own lease, with the
same checks in the same order (``leases.stage``); what changes is that commits
arriving while an earlier group is being written wait and go together into the next
transaction. On an idle worker a group has one member and nothing waits; under load
one COMMIT (one WAL flush, one BEGIN and COMMIT round trip, one NOTIFY) serves many
steps, while every step's outcome is still durable before its next step starts.

All or nothing holds per group, so a member that fails before COMMIT (a sequence
conflict, a lost lease, a deadlock) must not take the others down with it: the group
is rolled back and every member is committed again on its own, exactly as without
grouping, and gets its own answer. A failure of the COMMIT itself is settled once
(``commits.settle``) and every member gets that verdict. A member cancelled before
its group starts is dropped (nothing written); once its group has started it is
committed with the group, like a solo COMMIT that cannot be abandoned half way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import psycopg

from engine.model.transitions import Transition
from engine.store import commits, leases, transactions
from engine.store.errors import StoreError, StoreUnavailable
from engine.store.leases import Committed, LeaseFence
from engine.store.store import Store, newly_written, ready_to_write

COMMIT_LANES = 2
"""Groups one worker writes at the same time: while one waits for its WAL flush, the
next is being written."""
MAX_GROUP_MEMBERS = 32
"""Commits in one transaction at most: bounds how long its row locks are held."""


_Staged = tuple[list[Committed], list[Transition], str]
"""A group's results per member, the transitions it wrote, and its transaction's id."""


@dataclass
class _Member:
    transitions: Sequence[Transition]
    fence: LeaseFence | None
    answer: asyncio.Future[Committed] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class CommitGroup:
    """``commit_all`` like ``Store.commit_all`` or, with a fence, ``leases.commit``, with
    commits grouped (see the module)."""

    def __init__(
        self,
        store: Store,
        lanes: int = COMMIT_LANES,
        max_members: int = MAX_GROUP_MEMBERS,
        on_group: Callable[[int], None] = lambda members: None,
    ) -> None:
        """``on_group`` is told each group's size as it is written (a worker's metric)."""
        self.store = store
        self.lanes = lanes
        self.max_members = max_members
        self.on_group = on_group
        self._waiting: list[_Member] = []
        self._writers: set[asyncio.Task] = set()

    async def commit_all(
        self, transitions: Sequence[Transition], fence: LeaseFence | None = None
    ) -> Committed:
        """Commit ``transitions`` fenced by ``fence`` in the next group; its answer.

        A transition that breaks a structural rule is refused here, before it joins a
        group it would otherwise take down with it."""
        member = _Member(ready_to_write(transitions), fence)
        self._waiting.append(member)
        if len(self._writers) < self.lanes:
            writer = asyncio.create_task(self._write_groups())
            self._writers.add(writer)
            writer.add_done_callback(self._writers.discard)
        return await member.answer

    async def close(self) -> None:
        """Wait for the groups being written (their members may have been cancelled)."""
        await asyncio.gather(*self._writers, return_exceptions=True)

    async def _write_groups(self) -> None:
        """Write groups until none waits. The writer leaves ``_writers`` in the same step
        that finds the queue empty: its task's done-callback runs turns later, and a
        commit queued meanwhile would find every lane taken and no writer to take it
        (the callback stays for a writer cancelled before it ever ran).

        A writer is a task of its own that its members' callers never cancel (a caller
        cancelled meanwhile only drops its answer), so a group it has started is written
        to a classified end in it directly (``transactions.caller_proof``)."""
        transactions.caller_proof()
        try:
            await self._write_waiting()
        finally:
            self._writers.discard(asyncio.current_task())

    async def _write_waiting(self) -> None:
        while self._waiting:
            group = [m for m in self._waiting[: self.max_members] if not m.answer.done()]
            del self._waiting[: self.max_members]
            if not group:
                continue
            self.on_group(len(group))
            try:
                await self._write(group)
            except asyncio.CancelledError:
                for member in group:
                    member.answer.cancel()
                raise
            except Exception as exc:  # a bug must reach its members, not hang them
                _answer_all(group, exc)

    async def _write(self, group: list[_Member]) -> None:
        if len(group) == 1:
            await self._alone(group[0])
            return
        try:
            conn = await self.store.borrow()
        except StoreUnavailable as exc:
            _answer_all(group, exc)
            return
        try:
            together = await self._together(conn, group)
        finally:
            await self.store.give_back(conn)
        if not together:  # with the group's connection back in the pool for them
            await asyncio.gather(*(self._alone(member) for member in group))

    async def _together(self, conn: psycopg.AsyncConnection, group: list[_Member]) -> bool:
        """Commit the group in one transaction and answer its members; False (rolled
        back, nobody answered) when a member must be committed on its own: one failed
        before COMMIT, or was not written cleanly."""
        try:
            staged = await transactions.run(
                conn,
                "group commit",
                lambda conn: self._stage(conn, group),
                settle=lambda staged: self._settle(staged, group),
                commit=lambda staged: staged is not None,
                refused=lambda _: None,
                within=self.store.deadlines.operation,
            )
        except StoreError as exc:  # the COMMIT's settled verdict: every member's
            _answer_all(group, exc)
            return True
        if staged is None:
            return False
        for member, results in zip(group, staged[0], strict=True):
            _answer(member, results)
        return True

    async def _settle(self, staged: _Staged | None, group: list[_Member]) -> _Staged:
        """A failed COMMIT of the group, settled once for all of its members."""
        assert staged is not None  # a COMMIT follows a staging that answered
        _, written, xid = staged
        finished = [f for m in group if m.fence is not None for f in leases.finished_by(m.fence)]
        await self.store.settle_commit(written, xid, finished)
        return staged

    async def _stage(self, conn: psycopg.AsyncConnection, group: list[_Member]) -> _Staged | None:
        """Write every member in the open transaction: (results per member, the
        transitions written, the transaction id), or None when a member must be
        committed on its own. One message when every member is one statement, all of
        them fenced (a worker's) or none."""
        if _batchable(group):
            return await self._batch(conn, group)
        results, written, xid = [], [], ""
        for member in group:
            if member.fence is None:
                staged, xid = await self.store.stage_all(conn, member.transitions, xid=xid)
                committed = Committed(staged)
            else:
                committed, xid = await leases.stage(
                    conn, self.store, member.transitions, member.fence, xid=xid
                )
            results.append(committed)
            written += newly_written(member.transitions, committed.results)
        return results, written, xid

    async def _batch(self, conn: psycopg.AsyncConnection, group: list[_Member]) -> _Staged | None:
        """``_stage`` of a ``_batchable`` group, in one message."""
        transitions = [m.transitions[0] for m in group]
        fences = [m.fence for m in group if m.fence is not None]
        if fences:
            members = list(zip(transitions, fences, strict=True))
            staged = await leases.stage_set(conn, self.store, members)
            if staged is None:
                return None
            return staged[0], transitions, staged[1]
        plain = await self.store.stage_batch(conn, transitions)
        if plain is None:
            return None
        return [Committed([r]) for r in plain[0]], transitions, plain[1]

    async def _alone(self, member: _Member) -> None:
        try:
            if member.fence is None:
                committed = Committed(await self.store.commit_all(member.transitions))
            else:
                committed = await leases.commit(self.store, member.transitions, member.fence)
            _answer(member, committed)
        except Exception as exc:
            _answer_all([member], exc)


def _batchable(group: list[_Member]) -> bool:
    """Every member is one statement, and all are fenced (a worker's) or none is; none
    takes an offered lease (``leases.TAKING_WRITE`` has no set form)."""
    fenced = {m.fence is not None for m in group}
    untaken = any(m.fence is not None and leases.untaken(m.fence.lease) for m in group)
    return len(fenced) == 1 and not untaken and all(_one_write(m) for m in group)


def _one_write(member: _Member) -> bool:
    """A member written by one transition statement on an existing instance."""
    transitions = member.transitions
    return (
        len(transitions) == 1
        and commits.one_statement(transitions[0])
        and transitions[0].expected_sequence > 0
    )


def _answer(member: _Member, results: Committed) -> None:
    if not member.answer.done():
        member.answer.set_result(results)


def _answer_all(group: list[_Member], error: Exception) -> None:
    for member in group:
        if not member.answer.done():
            member.answer.set_exception(error)
