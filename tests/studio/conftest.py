"""Fixtures for studio tests: the session's PostgreSQL and a live studio on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.conftest import default_store, pg_dsn, schema, schema_name  # noqa: F401
from tests.studio.live import LiveStudio, serve_studio


@pytest.fixture(scope="session")
def studio(pg_dsn: str) -> Iterator[LiveStudio]:  # noqa: F811
    with serve_studio(pg_dsn) as live:
        yield live
