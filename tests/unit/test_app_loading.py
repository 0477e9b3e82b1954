"""``--app MODULE:REGISTRY`` that cannot be loaded says which of the usual mistakes it
is: a module not found from where the command runs, a name the module lacks, or a
package the module imports that is not installed."""

from __future__ import annotations

import os

import pytest

from engine.model.errors import ActivityAppNotFound
from engine.worker.activities import load_app


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (
            "wayline_no_such_app.orders:app",
            "no module wayline_no_such_app in the working directory ({cwd}) or on PYTHONPATH",
        ),
        ("examples.orders:nope", "examples.orders has no nope"),
        (
            "tests.fixtures.missing_dependency:app",
            "it imports wayline_fixture_not_installed, which is not installed",
        ),
        (
            "examples.orders:ActivityRegistry",
            "examples.orders:ActivityRegistry is not an ActivityRegistry",
        ),
    ],
)
def test_an_app_that_cannot_be_loaded_says_why(spec: str, says: str) -> None:
    with pytest.raises(ActivityAppNotFound) as refused:
        load_app(spec)
    assert str(refused.value).endswith(says.format(cwd=os.getcwd()))
