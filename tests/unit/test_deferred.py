"""A deferred map (a snapshot's mapping, entries decoded when read) behaves as the dict
the fold would have built: same entries, same order, after any updates; and an entry is
decoded once, only when read."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from engine.model.deferred import DeferredMap, with_entry

KEYS = st.sampled_from(["a", "b", "c", "d", "e", "f"])


@given(
    st.dictionaries(KEYS, st.integers()),
    st.lists(st.tuples(KEYS, st.integers()), max_size=12),
)
def test_updates_keep_the_order_and_entries_of_a_dict(
    restored: dict[str, int], updates: list[tuple[str, int]]
) -> None:
    deferred = DeferredMap({k: json.dumps(v) for k, v in restored.items()}, json.loads)
    plain = dict(restored)
    for key, value in updates:
        deferred = with_entry(deferred, key, value)
        plain = with_entry(plain, key, value)
        assert isinstance(deferred, DeferredMap) and type(plain) is dict
        assert list(deferred.items()) == list(plain.items())
        assert len(deferred) == len(plain) and deferred == plain
        for k in "az":
            assert deferred.get(k) == plain.get(k) and (k in deferred) == (k in plain)


def test_an_entry_is_decoded_once_when_first_read() -> None:
    decoded: list[str] = []

    def decode(text: str) -> int:
        decoded.append(text)
        return int(text)

    restored = DeferredMap({"a": "1", "b": "2"}, decode)
    updated = restored.with_entry("c", 3)
    assert decoded == [] and list(updated) == ["a", "b", "c"]
    assert updated["a"] == 1 and restored["a"] == 1 and updated.get("b") == 2
    assert decoded == ["1", "2"], "maps of one snapshot share what they decoded"
    assert updated.encoded("a") == "1" and updated.encoded("c") is None
    assert with_entry(updated, "a", 5).encoded("a") is None
