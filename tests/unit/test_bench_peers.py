"""The benchmark report compares Wayline with each peer's best shape and configuration,
and names it: a comparison with a peer's weaker shape would flatter Wayline."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import main, peers, report
from bench.results import Results, Sizes
from bench.w1 import Latency

SIZES = Sizes(10, 1, ((1, 16),), 3, 1, 10, (10,), 3, 3, 10, 3, 1)


def latency(engine: str, shape: str, *samples_ms: float) -> Latency:
    return Latency(engine, [ms / 1000 for ms in samples_ms], [0.001] * len(samples_ms), shape=shape)


def results(*latencies: Latency) -> Results:
    found = Results("latency", SIZES, "2026-12-03 15:00 UTC")
    found.latency = {lat.key: lat for lat in latencies}
    return found


@given(
    costs=st.lists(st.none() | st.floats(min_value=0, max_value=1e6), max_size=8),
)
def test_best_is_the_lowest_figure_and_skips_missing_ones(costs: list[float | None]) -> None:
    candidates = list(enumerate(costs))
    found = peers.best(candidates, lambda c: c[1])
    figures = [c for c in candidates if c[1] is not None]
    if not figures:
        assert found is None
    else:
        assert found is not None
        assert found[1] == min(c[1] for c in figures)
        assert found == next(c for c in figures if c[1] == found[1])  # first on a tie


def test_a_ratio_needs_both_figures() -> None:
    assert peers.ratio(10.0, 40.0) == 0.25
    assert peers.ratio(None, 40.0) is None
    assert peers.ratio(10.0, 0.0) is None


def test_each_peer_is_met_in_its_best_shape_and_the_shape_is_named() -> None:
    run = results(
        latency("wayline", "", 20, 21, 22),
        latency("dbos", "queue", 60, 62, 70),
        latency("dbos", "direct", 9, 10, 11),
        latency("procrastinate", "chain", 8, 10, 60),
    )
    view = report.View(run)
    assert view.best_latency("dbos").shape == "direct"
    rows = {row[0]: row for row in report.latency_rows(run.latency.values())}
    assert "DBOS (direct) (best)" in rows and "DBOS (queue)" in rows
    assert "procrastinate (chain) (best)" in rows
    assert rows["Wayline"][2] == "21.0"

    text = report.render_latency(run)
    median = next(line for line in text.splitlines() if ", median, ms" in line)
    assert median.split(" | ")[1:] == ["21.0", "10.0 (direct)", "10.0 (chain)", "2.10x", "2.10x |"]


def test_a_peer_that_was_not_measured_is_shown_as_missing() -> None:
    text = report.render_latency(results(latency("wayline", "", 5, 6, 7)))
    median = next(line for line in text.splitlines() if ", median, ms" in line)
    assert median.split(" | ")[1:] == ["6.0", "n/a", "n/a", "n/a", "n/a |"]


def test_shapes_are_filed_and_named_apart() -> None:
    assert peers.key("dbos", "direct") == "dbos direct" and peers.key("wayline", "") == "wayline"
    assert peers.label("dbos", "queue") == "DBOS (queue)" and peers.label("wayline") == "Wayline"
    assert latency("dbos", "direct", 1).key != latency("dbos", "queue", 1).key


def test_the_sample_count_must_be_asample_count_whole_number() -> None:
    assert main.sample_count("12") == 12
    for wrong in ("0", "-3", "ten", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError, match="at least 1"):
            main.sample_count(wrong)
