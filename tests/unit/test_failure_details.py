"""Failure details: what a worker records when a handler's detail is too large.

Replay bounds a failure's detail by the step's ``result_limit``, like a result. A
worker builds ``attempt_failed`` or ``attempt_unknown`` from whatever a handler raised
or returned, so the detail it records must always fit, or a known outcome could not be
written at all: whatever the detail and the limit, the recorded outcome is accepted.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.decide.decisions import record_outcome
from engine.decide.operator_actions import Action
from engine.model.canonical import canonical_json
from engine.model.events import EventKind, json_data
from engine.worker.activities import PREFIX_KEY, TRUNCATED_KEY, bounded_detail
from tests.unit.histories import Run

K = EventKind
TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from('"\\\n\x00é€😀'), max_size=1500)
DETAILS = st.none() | TEXT | st.dictionaries(st.text(max_size=8), TEXT, max_size=3)


@given(DETAILS, st.integers(0, 1200))
def test_a_recorded_detail_fits_the_limit_and_says_what_it_cut(detail: Any, limit: int) -> None:
    bounded = bounded_detail(detail, limit)
    assert len((json_data(bounded) or "").encode()) <= limit
    if detail is None:
        assert bounded is None
        return
    text = canonical_json(detail)
    if len(text.encode()) <= limit:
        assert bounded == detail
    elif bounded is not None:
        assert bounded[TRUNCATED_KEY] == len(text.encode())
        assert text.startswith(bounded[PREFIX_KEY])
    else:  # only when not even an empty marker fits
        assert limit < len(canonical_json({PREFIX_KEY: "", TRUNCATED_KEY: len(text.encode())}))


@settings(max_examples=50, deadline=None)
@given(DETAILS, st.booleans())
def test_any_failure_detail_a_worker_records_is_accepted(detail: Any, unknown: bool) -> None:
    """Through the builder and replay: activity ``a`` allows 1000 bytes and its
    compensation 100, and neither refuses a detail cut by ``bounded_detail``."""
    activity = Run()
    activity.start()
    activity.start_attempt("a")
    draft = activity.draft()
    kind = K.ATTEMPT_UNKNOWN if unknown else K.ATTEMPT_FAILED
    record_outcome(draft, "a", 1, kind, bounded_detail(detail, 1000), "boom")
    activity.commit(draft, advance=False)

    compensation = Run()
    compensation.start()
    compensation.run_activity("a")
    compensation.command(Action.CANCEL)
    compensation.start_attempt("a", compensation=True)
    draft = compensation.draft()
    kind = K.COMPENSATION_UNKNOWN if unknown else K.COMPENSATION_FAILED
    record_outcome(draft, "a", 1, kind, bounded_detail(detail, 100), "boom")
    compensation.commit(draft, advance=False)
