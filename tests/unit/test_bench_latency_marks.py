"""The latency breakdown names each sample's marks right: the claim that took the work
(not a poll that found nothing), commits and handlers in their order, nothing from
another sample's window; and the report shows them in the order they happen."""

from __future__ import annotations

from bench import latency_marks, report
from bench.cluster import Window
from bench.latency_marks import CLAIM_TIMED
from bench.pgbench import PgbenchRun
from bench.results import Results
from bench.w1 import Latency
from engine.worker.faults import Boundary
from tests.unit.test_bench_peers import SIZES

B = Boundary


def test_a_sample_names_the_claim_that_took_its_work_and_numbers_commits_and_handlers():
    worker = [
        (0.5, B.BEFORE_COMMIT.value),  # the previous sample's, before this one began
        (1.001, CLAIM_TIMED),  # a poll that found nothing
        (1.002, CLAIM_TIMED),  # the claim that took the work
        (1.003, B.AFTER_CLAIM.value),
        (1.004, B.BEFORE_COMMIT.value),
        (1.005, B.AFTER_COMMIT.value),
        (1.006, B.AFTER_ATTEMPT_START.value),
        (1.007, B.AFTER_HANDLER.value),
        (1.008, B.BEFORE_COMMIT.value),
        (1.009, B.AFTER_COMMIT.value),
        (1.020, CLAIM_TIMED),  # after the probe saw it completed: the next sample's
    ]
    marks = latency_marks.offsets(1.0, 1.0015, 1.010, worker)
    assert {label: round(ms, 3) for label, ms in marks.items()} == {
        "start call answered": 1.5,
        "claim that took it began": 2.0,
        "claim answered": 3.0,
        "commit 1 sent": 4.0,
        "commit 1 answered": 5.0,
        "handler 1 called": 6.0,
        "handler 1 returned": 7.0,
        "commit 2 sent": 8.0,
        "commit 2 answered": 9.0,
        "probe saw it completed": 10.0,
    }


def test_the_report_lists_marks_by_their_median_with_the_gap_to_the_row_above():
    samples = [
        {"start call answered": 3.0, "claim answered": 4.0, "probe saw it completed": 9.0},
        {"start call answered": 2.0, "claim answered": 5.0, "probe saw it completed": 11.0},
        {"start call answered": 2.5, "probe saw it completed": 10.0},
    ]
    ours = Latency("wayline", [0.01] * 3, [0.0025] * 3, marks=samples)
    found = Results("latency", SIZES, "2026-12-04 00:00 UTC")
    found.latency = {ours.key: ours}
    text = report.render_latency(found)
    assert "| start call answered | 3/3 | 2.50 | +2.50 |" in text
    assert "| claim answered | 2/3 | 4.50 | +2.00 |" in text
    assert "| probe saw it completed | 3/3 | 10.00 | +5.50 |" in text
    assert text.index("| start call answered |") < text.index("| claim answered |")


def test_the_path_counts_the_commits_most_samples_made():
    rows = [
        ("claim that took it began", 3, 1.0),  # a claim's start commits nothing
        ("start call answered", 3, 1.1),
        ("claim answered", 3, 2.0),  # a claim does not wait for its flush
        ("commit 1 sent", 3, 2.2),
        ("commit 1 answered", 3, 3.0),
        ("handler 1 returned", 3, 3.2),
        ("commit 2 answered", 2, 4.0),
        ("commit 3 answered", 1, 5.0),  # in one sample of three: not the path's
        ("probe saw it completed", 3, 5.5),
    ]
    assert latency_marks.durable_commits(rows, 3) == 3


def test_the_report_sets_the_path_against_one_commit_at_this_hosts_floor():
    samples = [
        {"start call answered": 2.0, "claim answered": 3.0, "commit 1 answered": 4.0},
        {"start call answered": 2.0, "claim answered": 3.0, "commit 1 answered": 4.0},
    ]
    ours = Latency("wayline", [0.008, 0.008], [0.002] * 2, marks=samples)
    dbos = Latency("dbos", [0.010, 0.010], [0.010] * 2, shape="direct")
    found = Results("latency", SIZES, "2026-12-05 00:00 UTC")
    found.latency = {ours.key: ours, dbos.key: dbos}
    assert "floor on this host" not in report.render_latency(found)  # no pgbench: no floor

    found.pgbench_before = [PgbenchRun(1, 5, 1250.0, 0.8, Window())]
    text = report.render_latency(found)
    assert "made 1,250 durable commits/s, 0.80 ms each" in text
    assert "waits for 2 durable commits" in text
    assert "1.6 ms of its 8.0 ms median" in text
    assert "half of DBOS's best shape (DBOS (direct), 10.0 ms) is 5.0 ms" in text
    assert "-R 100" not in text  # no idle run measured: nothing said of one

    found.pgbench_idle = PgbenchRun(1, 5, 99.5, 1.1, Window(), rate=100)
    text = report.render_latency(found)
    assert "at 100 transactions/s (`-R 100`: the machine idle" in text
    assert "one took 1.10 ms, and 2 such are 2.2 ms" in text


def test_the_floor_paragraph_ends_before_the_next_heading():
    ours = Latency("wayline", [0.008], [0.002], marks=[{"commit 1 answered": 4.0}])
    found = Results("latency", SIZES, "2026-12-05 00:00 UTC")
    found.latency = {ours.key: ours}
    found.pgbench_before = [PgbenchRun(1, 5, 1250.0, 0.8, Window())]
    lines = report.render(found).splitlines()
    assert any(line.startswith("The floor on this host") for line in lines)
    for number, line in enumerate(lines[1:], start=1):
        if line.startswith("## "):
            assert lines[number - 1] == "", f"no blank line before {line!r}"
