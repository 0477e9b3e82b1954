"""Settings every test shares.

Hypothesis runs without per-example deadlines: on 2 shared cores a slow example is
load, not a bug, and a timing failure would make CI flaky. Examples stay bounded by
each test's own settings, and pytest-timeout bounds every test.

The long drill runs start with the session and are judged at its end
(``tests/drills/background.py``): the tests that judge them run last.
"""

from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.drills import background

settings.register_profile("wayline", deadline=None, print_blob=True)
settings.load_profile("wayline")


def _background_runs(item: pytest.Item) -> set[str]:
    return {name for mark in item.iter_markers(background.MARKER) for name in mark.args}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that judge a background drill run go last, in their order, so that the
    run overlaps every other test."""
    items.sort(key=lambda item: bool(_background_runs(item)))


@pytest.fixture(scope="session", autouse=True)
def _background_drills(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Start, before the first test, every background run the session's tests judge."""
    names = set().union(*(_background_runs(item) for item in request.session.items))
    if names:
        background.start(names, tmp_path_factory.mktemp("background-drills"))
    yield
    background.stop_all()
