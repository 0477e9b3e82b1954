"""A code workflow's fingerprint: what the code does changes it; how it is written
(formatting, comments, docstrings, blank lines, code above it) does not."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.model.canonical import digest
from engine.modes.code.outline import outline, without_lines
from engine.modes.code.source import ast_digest
from tests.unit.code_modules import declared

BASE = """
@app.workflow("order-saga", version="1")
async def order_saga(ctx, order):
    reserved = await ctx.step("reserve", order.get, retries=3, timeout="30s")
    if reserved:
        await ctx.sleep("1h")
    for item in order["items"]:
        await ctx.step(f"pack-{item}", order.get)
    return {"outcome": "done"}
"""
REWRITTEN = """
# A comment above the workflow, and code that moves every line down.
UNUSED = 1


@app.workflow('order-saga', version='1')
async def order_saga(ctx, order):
    '''A docstring, which is documentation and no code.'''
    reserved = await ctx.step(
        'reserve',   # a comment
        order.get,
        retries=3,
        timeout='30s',
    )

    if reserved:  # another
        await ctx.sleep('1h')
    for item in order['items']:
        await ctx.step(f'pack-{item}', order.get)
    return {'outcome': 'done'}
"""
CHANGES = {
    "a renamed step": ('"reserve"', '"hold"'),
    "another option": ("retries=3", "retries=4"),
    "another duration": ('ctx.sleep("1h")', 'ctx.sleep("2h")'),
    "a statement without a verb": ("    return {", "    order = dict(order)\n    return {"),
    "another result": ('"done"', '"finished"'),
    "another test": ("if reserved:", "if not reserved:"),
    "another version": ('version="1"', 'version="2"'),
    "another name": ('workflow("order-saga"', 'workflow("order-sagas"'),
}


def test_formatting_comments_docstrings_and_moved_lines_keep_the_fingerprint(
    tmp_path: Path,
) -> None:
    base, rewritten = declared(tmp_path, BASE), declared(tmp_path, REWRITTEN)
    assert rewritten.outline != base.outline  # the lines moved ...
    assert rewritten.ast_digest == base.ast_digest
    assert rewritten.fingerprint == base.fingerprint  # ... and nothing else did


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_change_to_the_code_changes_the_fingerprint(tmp_path: Path, change: str) -> None:
    old, new = CHANGES[change]
    assert old in BASE
    assert declared(tmp_path, BASE.replace(old, new)).fingerprint != (
        declared(tmp_path, BASE).fingerprint
    )


def test_the_fingerprint_is_pinned(tmp_path: Path) -> None:
    """A vector: the digest's JSON form of the tree must not drift between releases or
    Python versions (a drift would make every published version look changed)."""
    flow = declared(tmp_path, BASE)
    assert flow.ast_digest == "37f68b43d2d26328ee265e96a632c6d6f68959d3a15642505b2a25c0c465d7ed"
    assert flow.fingerprint == "bd718c448ffda9d03fee0806cf1676b555cbde8095bc5366ae4f6dc9a782e654"


def _fingerprinted(text: str) -> str:
    node = ast.parse(text).body[0]
    assert isinstance(node, ast.AsyncFunctionDef)
    return digest([ast_digest(node), without_lines(outline(node, "ctx"))])


@given(
    st.lists(
        st.tuples(st.integers(0, 20), st.sampled_from(["", "# note", "    # indented note"])),
        max_size=8,
    )
)
def test_blank_and_comment_lines_anywhere_keep_the_digest_and_outline(
    inserts: list[tuple[int, str]],
) -> None:
    lines = textwrap.dedent(BASE).strip().splitlines()[1:]  # without the decorator
    for position, text in inserts:
        lines.insert(min(position, len(lines)), text)
    assert _fingerprinted("\n".join(lines)) == _fingerprinted("\n".join(BASE.splitlines()[2:]))
