"""The history-scale benchmark's pure parts: how many ended instances make a size, how a
copy rewrites a row, how removal phases pool claim samples, and how its section of
``bench/RESULTS.md`` survives a full run rewriting that file."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import ended_rows, history_report, removal, scale_results
from bench.history_report import HEADING
from bench.scale_results import Sample

TEMPLATE = {"instances": 1, "history": 32, "transitions": 21, "work": 10}


@given(events=st.integers(min_value=0, max_value=10**9))
def test_the_fewest_copies_that_reach_the_size(events: int) -> None:
    found = ended_rows.shape(events, TEMPLATE)
    assert found.events >= events > found.events - 32
    assert (found.ledger, found.work) == (21 * found.instances, 10 * found.instances)


def test_ten_million_events_are_312500_instances_of_32() -> None:
    found = ended_rows.shape(10**7, TEMPLATE)
    assert (found.instances, found.ledger, found.work) == (312_500, 6_562_500, 3_125_000)


@pytest.mark.parametrize(
    ("events", "rows", "message"),
    [(-1, TEMPLATE, "events is -1"), (10, {**TEMPLATE, "history": 0}, "no history rows")],
)
def test_impossible_shapes_are_refused(events: int, rows: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ended_rows.shape(events, rows)


def test_a_copy_renames_ids_shifts_times_and_keeps_the_rest() -> None:
    statement = ended_rows.copy_statement(
        "s",
        "work",
        [
            ("work_id", "text"),
            ("payload", "bytea"),
            ("available_at", "timestamp with time zone"),
            ("attempts", "bigint"),
        ],
    )
    assert statement.count("%(template)s") == 3  # both renames and the WHERE
    assert "replace(t.work_id, %(template)s" in statement
    assert "convert_from(t.payload, 'UTF8')" in statement
    assert "t.available_at + %(first)s::interval + k * %(spacing)s::interval" in statement
    assert "t.attempts\nFROM" in statement
    assert statement.startswith("/* bench-probe */ INSERT INTO s.work (work_id, payload, ")


def test_claim_samples_are_pooled_by_the_phase_they_started_in() -> None:
    spans = [("idle", 0.0, 1.0), ("delete", 1.0, 2.0), ("idle", 3.0, 4.0)]
    samples = [(0.5, 1.0), (1.0, 5.0), (1.9, 7.0), (2.5, 99.0), (3.5, 2.0)]
    assert removal.pooled(spans, samples) == {"idle": [1.0, 2.0], "delete": [5.0, 7.0]}


def test_the_partitioned_copy_adds_the_key_to_the_primary_key() -> None:
    months = [datetime(2025, m, 1, tzinfo=UTC) for m in (1, 2, 3)]
    bounds = list(itertools.pairwise(months))
    statements = removal.partitioned_table(
        "p", "history", "s", "instance_id, sequence", ("instance_id, kind, sequence",), bounds
    )
    text = "\n".join(statements)
    assert "PRIMARY KEY (instance_id, sequence, instance_created_at)" in text
    assert "PARTITION BY RANGE (instance_created_at)" in text
    assert text.count("PARTITION OF p.history") == 2
    assert (
        "p.history_m01 PARTITION OF p.history FOR VALUES FROM ('2025-02-01T00:00:00+00:00')" in text
    )


@given(st.lists(st.floats(min_value=0, max_value=1e4), min_size=1, max_size=300))
def test_p99_is_one_of_the_samples_and_not_below_the_median(timings: list[float]) -> None:
    found = scale_results.sample("x", timings)
    assert found.p99_ms in timings and found.p99_ms >= found.median_ms
    assert found.calls == len(timings)


def test_a_side_by_side_row_says_how_the_median_moved() -> None:
    before = [Sample("claim 1", 200, 2.0, 4.0, 0.5), Sample("only before", 1, 1, 1)]
    after = [Sample("claim 1", 200, 3.0, 5.0, 0.6)]
    rows = history_report.side_by_side(before, after)
    assert rows[2] == "| claim 1 | 200 | 2.00 | 4.00 | 3.00 | 5.00 | +50 % | 0.500 | 0.600 |"
    assert len(rows) == 3
    assert history_report.change(0, 1) == history_report.DASH


REPORT = "# Benchmarks\n\n## W4\n\ntable\n\n## Noise\n\n- noisy\n"
text = st.text(st.characters(exclude_characters="#"), max_size=40)


@given(body=text)
def test_a_full_run_keeps_the_section_of_the_file_it_replaces(body: str) -> None:
    section = f"{HEADING}\n\n{body}\n"
    old = history_report.splice(REPORT, section)
    assert history_report.section_of(old).rstrip("\n") == section.rstrip("\n")
    rewritten = history_report.splice(
        REPORT.replace("noisy", "quiet"), history_report.section_of(old)
    )
    assert history_report.section_of(rewritten).rstrip("\n") == section.rstrip("\n")
    assert rewritten.startswith(REPORT.replace("noisy", "quiet").rstrip("\n"))


def test_a_new_section_replaces_the_old_one_in_place() -> None:
    document = f"# B\n\n{HEADING}\n\nold figures\n\n## Noise\n\n- n\n"
    replaced = history_report.splice(document, f"{HEADING}\n\nnew figures\n")
    assert replaced == f"# B\n\n{HEADING}\n\nnew figures\n\n## Noise\n\n- n\n"
    assert history_report.splice(document, "") == document
