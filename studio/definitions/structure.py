"""The block structure of a definition document, read tolerantly.

Definitions are a flat list of steps in which parallel and race steps name their
branch steps and a join names the branches it waits for. People think of them as
blocks: a sequence, a parallel that fans out and closes at its join, a race whose first
branch wins. The graph, the outline and the editor's moves all need that tree, and they
need it for drafts that do not validate yet, so this module never raises: whatever the
document holds, every step lands in exactly one block, in document order.

Rules (the same the engine walks by): a step named as a branch by an earlier parallel
or race belongs to that owner; every other step is top level. A parallel's block ends
at the first later top-level join that lists the same branches; top-level steps between
the two run while the branches do and form one more column of the block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

FORK_KINDS = ("parallel", "race")
_INDEX_REF = re.compile(r"^#\d+$")


@dataclass(frozen=True)
class StepShape:
    """What the structure needs of one raw step: position, name, kind and branch names."""

    index: int
    name: str
    kind: str
    branches: tuple[str, ...]
    raw: dict[str, Any]
    element_id: str = ""
    """The node's element id when another mode names its nodes (code outlines)."""
    label: str = ""
    """The node's title when it is not the step's name (an outline's ``if x > 3``)."""
    detail: str = ""
    """The node's second line when ``graph.describe`` cannot tell it from the kind."""
    ref: str = ""
    """How links and the editor's selection name this step: its name when it is the
    first step so named, else ``#<index>`` (``#`` is not allowed in names), so a draft
    holding one name twice still lets each of the two be chosen."""

    @property
    def node_id(self) -> str:
        """The element id of this step's node; stable while the step keeps its name."""
        return self.element_id or step_node_id(self.name, self.index)


@dataclass(frozen=True)
class Block:
    """One step, or a fork: a parallel or race head, its columns and the closing join.

    ``columns`` are sequences of blocks: one per branch, then (for a parallel with steps
    between it and its join) the steps that run meanwhile. ``tail`` is the join.
    """

    head: StepShape
    columns: tuple[tuple[Block, ...], ...] = ()
    tail: StepShape | None = None
    meanwhile: bool = False
    """True when the last column holds the steps between a parallel and its join."""
    fork: bool | None = None
    """Whether the block forks; None: when its head is a parallel or a race (other modes
    say so themselves: an outline's branch forks, its ``race`` verb does not)."""
    closing: str = "first wins"
    """The label of the point where a fork without a join closes."""

    @property
    def is_fork(self) -> bool:
        return self.head.kind in FORK_KINDS if self.fork is None else self.fork

    def members(self) -> list[StepShape]:
        """Every step of the block, head first, tail last."""
        found = [self.head]
        for column in self.columns:
            for block in column:
                found.extend(block.members())
        if self.tail is not None:
            found.append(self.tail)
        return found

    @property
    def first_index(self) -> int:
        return self.head.index


@dataclass(frozen=True)
class Structure:
    """The top-level sequence of blocks of one document, and its steps by position."""

    blocks: tuple[Block, ...]
    steps: tuple[StepShape, ...]
    owned: dict[int, int] = field(default_factory=dict)
    """Branch step position -> the position of the parallel or race that owns it."""

    def step(self, ref: str) -> StepShape | None:
        """The step a link or selection names (``StepShape.ref``; a name works too)."""
        return next((s for s in self.steps if (s.ref or s.name) == ref), None)

    def owner_of(self, step: StepShape) -> StepShape | None:
        """The parallel or race that ``step`` is a branch of, if any."""
        owner = self.owned.get(step.index)
        return None if owner is None else self.steps[owner]

    def branch_step(self, owner: StepShape, name: str) -> StepShape | None:
        """The step that branch ``name`` of ``owner`` is (not merely one so named)."""
        return _branch_of(self.steps, self.owned, owner, name)

    def fork_of(self, index: int) -> Block | None:
        """The fork block headed by step ``index`` (a parallel or race), if any."""
        found = self.block_of(index)
        if found is None:
            return None
        block = found[0][found[1]]
        return block if block.is_fork else None

    def block_of(self, index: int) -> tuple[tuple[Block, ...], int] | None:
        """The sequence holding the block headed by step ``index``, and its position there."""
        return _find_block(self.blocks, index)

    def insertion_after(self, index: int) -> int | None:
        """Where a step inserted right after the block headed by ``index`` belongs.

        Before the next block of the same sequence; at the end of the document after
        the last top-level block; before the join after the last step that runs
        meanwhile. None for branch steps (a fork gets new branches instead).
        """
        return _insertion_after(self.blocks, index, len(self.steps))

    def normalized_order(self) -> list[int]:
        """Step indexes in block order: each block's members together, heads first."""
        order = [s.index for block in self.blocks for s in block.members()]
        placed = set(order)
        return order + [s.index for s in self.steps if s.index not in placed]


def step_node_id(name: str, index: int) -> str:
    """``step-<name>`` for a usable name, ``step-n<index>`` otherwise."""
    usable = bool(name) and all(c.isalnum() or c in "._-" for c in name) and name.isascii()
    return f"step-{name}" if usable else f"step-n{index}"


def raw_steps(document: Any) -> list[Any]:
    """The document's step list, or an empty list when it has none."""
    steps = document.get("steps") if isinstance(document, dict) else None
    return steps if isinstance(steps, list) else []


def shape_of(index: int, raw: Any) -> StepShape:
    """A step's shape; unusable fields become empty values instead of errors."""
    obj = raw if isinstance(raw, dict) else {}
    name = obj.get("name")
    kind = obj.get("kind")
    branches = obj.get("branches")
    return StepShape(
        index=index,
        name=name if isinstance(name, str) else "",
        kind=kind if isinstance(kind, str) else "",
        branches=tuple(b for b in branches if isinstance(b, str))
        if isinstance(branches, list)
        else (),
        raw=obj,
    )


def read_structure(document: Any) -> Structure:
    """The block tree of ``document``; never raises."""
    steps = identified(tuple(shape_of(i, raw) for i, raw in enumerate(raw_steps(document))))
    owned = _owned(steps)
    builder = _Builder(steps, owned)
    top = [s for s in steps if s.index not in owned]
    blocks = builder.sequence(top)
    return Structure(tuple(blocks), steps, owned)


def step_refs(document: Any) -> list[str]:
    """Each step's ``ref`` by position: how a link or the editor's selection names it
    (its name, or ``#<index>`` when it has none or an earlier step has the same one)."""
    shapes = tuple(shape_of(i, raw) for i, raw in enumerate(raw_steps(document)))
    return [step.ref for step in identified(shapes)]


def identified(steps: tuple[StepShape, ...]) -> tuple[StepShape, ...]:
    """The steps with a ``ref`` and an element id that no other step of them has.

    A draft may hold one name twice (typed in the JSON view, imported): the first keeps
    its name as ref and ``step-<name>`` as id, the others are told apart by position.
    """
    names: set[str] = set()
    ids: set[str] = set()
    found = []
    for step in steps:
        first = bool(step.name) and step.name not in names and not _INDEX_REF.match(step.name)
        names.add(step.name)
        node_id = step.node_id if first else f"step-n{step.index}"
        while node_id in ids:
            node_id = f"{node_id}-{step.index}"
        ids.add(node_id)
        ref = step.name if first else f"#{step.index}"
        found.append(replace(step, element_id=node_id, ref=ref))
    return tuple(found)


def _owned(steps: tuple[StepShape, ...]) -> dict[int, int]:
    """Branch position -> owner position: each branch name of a parallel or race is the
    first step so named after it that no earlier fork took."""
    owned: dict[int, int] = {}
    for step in steps:
        if step.kind not in FORK_KINDS:
            continue
        for branch in step.branches:
            found = next(
                (
                    s.index
                    for s in steps[step.index + 1 :]
                    if s.name == branch and s.index not in owned
                ),
                None,
            )
            if found is not None:
                owned[found] = step.index
    return owned


def _branch_of(
    steps: tuple[StepShape, ...], owned: dict[int, int], owner: StepShape, name: str
) -> StepShape | None:
    return next((s for s in steps if s.name == name and owned.get(s.index) == owner.index), None)


class _Builder:
    """Builds blocks, placing each step index once."""

    def __init__(self, steps: tuple[StepShape, ...], owned: dict[int, int]) -> None:
        self.steps = steps
        self.owned = owned
        self.placed: set[int] = set()

    def sequence(self, candidates: list[StepShape]) -> list[Block]:
        blocks: list[Block] = []
        position = 0
        while position < len(candidates):
            step = candidates[position]
            position += 1
            if step.index in self.placed:
                continue
            self.placed.add(step.index)
            if step.kind == "parallel":
                block, consumed = self._parallel(step, candidates[position:])
                position += consumed
            elif step.kind == "race":
                block = Block(step, self._branch_columns(step))
            else:
                block = Block(step)
            blocks.append(block)
        return blocks

    def _branch_columns(self, owner: StepShape) -> tuple[tuple[Block, ...], ...]:
        columns = []
        for name in owner.branches:
            branch = _branch_of(self.steps, self.owned, owner, name)
            if branch is None or branch.index in self.placed:
                continue
            self.placed.add(branch.index)
            columns.append((Block(branch),))
        return tuple(columns)

    def _parallel(self, head: StepShape, rest: list[StepShape]) -> tuple[Block, int]:
        """The parallel's block, and how many of the following top-level steps it took."""
        columns = self._branch_columns(head)
        wanted = set(head.branches)
        join_at = next(
            (
                i
                for i, s in enumerate(rest)
                if s.kind == "join" and set(s.branches) == wanted and s.index not in self.placed
            ),
            None,
        )
        if join_at is None:
            return Block(head, columns), 0
        tail = rest[join_at]
        meanwhile = self.sequence(rest[:join_at])
        self.placed.add(tail.index)
        if meanwhile:
            columns = (*columns, tuple(meanwhile))
        return Block(head, columns, tail, meanwhile=bool(meanwhile)), join_at + 1


def _find_block(blocks: tuple[Block, ...], index: int) -> tuple[tuple[Block, ...], int] | None:
    for position, block in enumerate(blocks):
        if block.head.index == index:
            return blocks, position
        for column in block.columns:
            found = _find_block(column, index)
            if found is not None:
                return found
    return None


def _insertion_after(blocks: tuple[Block, ...], index: int, end: int) -> int | None:
    for position, block in enumerate(blocks):
        if block.head.index == index:
            return blocks[position + 1].first_index if position + 1 < len(blocks) else end
        if block.meanwhile and block.tail is not None:
            found = _insertion_after(block.columns[-1], index, block.tail.index)
            if found is not None:
                return found
    return None
