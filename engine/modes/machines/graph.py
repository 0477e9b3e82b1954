"""The shape of a machine's edges: which states a walk from the initial state can reach,
and from which of them it can still end.

A state no walk reaches is dead weight in the diagram and a sign of a missing edge; a
reachable state from which no terminal state is reachable can only loop until its
execution is dead (``max_transitions``). Both are refused when a manifest is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def reachable(start: str, edges: Mapping[str, Iterable[str]]) -> set[str]:
    """Every state a walk along ``edges`` from ``start`` can enter (with ``start``)."""
    seen = {start}
    frontier = [start]
    while frontier:
        for target in edges.get(frontier.pop(), ()):
            if target not in seen:
                seen.add(target)
                frontier.append(target)
    return seen


def stuck(
    states: Iterable[str], edges: Mapping[str, Iterable[str]], terminal: Iterable[str]
) -> list[str]:
    """The ``states`` (in their order) from which no terminal state is reachable."""
    ends = set(terminal)
    return [state for state in states if not reachable(state, edges) & ends]
