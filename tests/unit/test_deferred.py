"""The state's mappings behave as the dicts the fold would have built by copying: same
entries, same order, after any updates, whether restored from a snapshot (entries
decoded when read, once) or grown past ``SMALL``; and an update shares what it did not
change, so a long history's fold does not copy every entry per event."""

from __future__ import annotations

import json
from collections.abc import Mapping

from hypothesis import given
from hypothesis import strategies as st

from engine.model.deferred import SMALL, LayeredMap, restored, with_entry

KEYS = st.sampled_from(["a", "b", "c", "d", "e", "f"])
MANY_KEYS = st.integers(0, 3 * SMALL).map(lambda k: f"k{k}")


def _same_as_a_dict(layered: object, plain: dict[str, int], absent: str) -> None:
    assert isinstance(layered, LayeredMap) and type(plain) is dict
    assert list(layered.items()) == list(plain.items())
    assert len(layered) == len(plain) and layered == plain and plain == layered
    for k in (*list(plain)[:3], absent):
        assert layered.get(k) == plain.get(k) and (k in layered) == (k in plain)


@given(
    st.dictionaries(KEYS, st.integers()),
    st.lists(st.tuples(KEYS, st.integers()), max_size=12),
)
def test_updates_of_a_restored_map_keep_the_order_and_entries_of_a_dict(
    kept: dict[str, int], updates: list[tuple[str, int]]
) -> None:
    layered = restored({k: json.dumps(v) for k, v in kept.items()}, json.loads)
    plain = dict(kept)
    for key, value in updates:
        layered = with_entry(layered, key, value)
        plain = with_entry(plain, key, value)
        _same_as_a_dict(layered, plain, "z")


@given(
    st.integers(SMALL, 2 * SMALL),
    st.lists(st.tuples(MANY_KEYS, st.integers()), max_size=4 * SMALL),
)
def test_a_map_grown_past_small_keeps_the_order_and_entries_of_a_dict(
    size: int, updates: list[tuple[str, int]]
) -> None:
    """Enough updates to merge ``recent`` into ``older`` several times, on keys of the
    base, of earlier changes and new ones."""
    plain = {f"k{k}": k for k in range(size)}
    layered: Mapping[str, int] = plain
    for key, value in updates:
        layered = with_entry(layered, key, value)
        plain = {**plain, key: value}
    if updates:
        _same_as_a_dict(layered, plain, "z")


def test_a_small_map_stays_a_dict_and_an_update_leaves_the_old_map_as_it_was() -> None:
    small = {f"k{k}": k for k in range(SMALL - 1)}
    assert type(with_entry(small, "x", 1)) is dict
    base = {f"k{k}": k for k in range(SMALL)}
    first = with_entry(base, "k0", -1)
    second = with_entry(first, "new", 7)
    assert base["k0"] == 0 and "new" not in first and len(first) == SMALL
    assert second["k0"] == -1 and len(second) == SMALL + 1 and list(second)[-1] == "new"


def test_an_entry_is_decoded_once_when_first_read() -> None:
    decoded: list[str] = []

    def decode(text: str) -> int:
        decoded.append(text)
        return int(text)

    snapshot = restored({"a": "1", "b": "2"}, decode)
    updated = snapshot.with_entry("c", 3)
    assert decoded == [] and list(updated) == ["a", "b", "c"]
    assert updated["a"] == 1 and snapshot["a"] == 1 and updated.get("b") == 2
    assert decoded == ["1", "2"], "maps of one snapshot share what they decoded"
    assert updated.encoded("a") == "1" and updated.encoded("c") is None
    assert with_entry(updated, "a", 5).encoded("a") is None
    assert with_entry({f"k{k}": k for k in range(SMALL)}, "x", 1).encoded("k1") is None
