"""Fixtures for studio tests: the session's PostgreSQL and a live studio on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from studio.roles import Role
from tests.integration.conftest import default_store, pg_dsn, schema, schema_name, schema_pool  # noqa: F401
from tests.studio.live import LiveStudio, SignedInClient, serve_studio


@pytest.fixture(scope="session")
def studio(pg_dsn: str) -> Iterator[LiveStudio]:  # noqa: F811
    with serve_studio(pg_dsn) as live:
        yield live


@pytest.fixture(scope="module")
def team(request: pytest.FixtureRequest, studio: LiveStudio) -> str:
    """A team of the module's own, named after it (``test_plan_pages`` gets
    ``plan-pages-…``), so no two modules see each other's data; a module that seeds its
    team defines ``team`` itself."""
    module = request.module.__name__.rpartition(".")[2].removeprefix("test_")
    return studio.team(module.replace("_", "-"))


@pytest.fixture(scope="module")
def operator(studio: LiveStudio, team: str) -> SignedInClient:
    """An operator of the module's ``team`` (each module that asks names its own)."""
    return studio.client(studio.user(team, Role.OPERATOR))


@pytest.fixture(scope="module")
def viewer(studio: LiveStudio, team: str) -> SignedInClient:
    """A viewer of the module's ``team``."""
    return studio.client(studio.user(team, Role.VIEWER))
