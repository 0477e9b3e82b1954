"""The replica lag a read page states (``studio.read_lag.lag_between``), as properties."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from engine.api.queries import WalPosition
from studio.read_lag import ReadLag, lag_between

NOW = datetime(2026, 12, 3, 12, tzinfo=UTC)
HEADER = re.compile(r"bytes=(\d+)(; seconds=\d+\.\d{3})?")
lsns = st.integers(min_value=0, max_value=2**40)
ages = st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=2))


def primary(lsn: int) -> WalPosition:
    return WalPosition(False, lsn, None, NOW)


def standby(lsn: int | None, age: timedelta | None) -> WalPosition:
    return WalPosition(True, lsn, None if age is None else NOW - age, NOW)


@given(lsns, lsns, st.none() | ages)
def test_the_lag_is_the_wal_not_replayed_and_never_negative(
    flushed: int, replayed: int, age: timedelta | None
) -> None:
    lag = lag_between(primary(flushed), standby(replayed, age))
    assert lag.behind_bytes == max(flushed - replayed, 0)
    assert lag.up_to_date == (replayed >= flushed)
    found = HEADER.fullmatch(lag.header)
    assert found and int(found.group(1)) == lag.behind_bytes
    assert bool(found.group(2)) == (lag.up_to_date or age is not None)
    if lag.up_to_date:
        assert lag.at_most is None and "up to date" in lag.notice
    else:
        assert lag.at_most == age  # bounded by the newest replayed commit's age
        assert f"{lag.behind_bytes:,} bytes not replayed" in lag.notice


@given(lsns, st.none() | lsns)
def test_a_server_that_is_no_standby_or_replayed_nothing_has_an_unknown_lag(
    flushed: int, lsn: int | None
) -> None:
    for server in (WalPosition(False, lsn, None, NOW), standby(None, None)):
        lag = lag_between(primary(flushed), server)
        assert lag == ReadLag(None)
        assert lag.header == "unknown" and "lag is unknown" in lag.notice
        assert not lag.up_to_date
