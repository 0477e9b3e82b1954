"""Markdown tables, drawn the one way every section of ``bench/RESULTS.md`` draws them."""

from __future__ import annotations

from collections.abc import Iterable


def table(header: list[str], rows: Iterable[list[str]]) -> list[str]:
    """The table's lines: the header, the rule under it, a line per row. A ``|`` in a cell
    is escaped, so a cell's text can never split it."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return lines
