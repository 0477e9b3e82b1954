"""``--app MODULE:REGISTRY`` that cannot be loaded says which of the usual mistakes it
is: a module not found from where the command runs, a name the module lacks, or a
package the module imports that is not installed; and a name that is not the module's
registry says which is (or how to build one)."""

from __future__ import annotations

import os
from pathlib import Path

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
        (
            "examples.orders:nope",
            ("examples.orders has no nope; the ActivityRegistry in examples.orders is app"),
        ),
        (
            "engine.model.canonical:app",
            "engine.model.canonical has no app; engine.model.canonical holds no "
            "ActivityRegistry: build one (app = ActivityRegistry())",
        ),
        (
            "tests.fixtures.missing_dependency:app",
            "it imports wayline_fixture_not_installed, which is not installed",
        ),
        (
            "examples.orders:ActivityRegistry",
            "ActivityRegistry is a type, not an ActivityRegistry; the ActivityRegistry in "
            "examples.orders is app",
        ),
        *(  # a file path was imported as a module: "importing ../x raised TypeError ..."
            (path, "a name in it, e.g. examples.orders:app (not a file path)")
            for path in (
                *("../x:app", "examples/orders.py:app", "examples.orders:app()", "x.py:app"),
                *("examples.orders", "examples.orders:", ":app"),  # it said no more than that
            )
        ),
    ],
)
def test_an_app_that_cannot_be_loaded_says_why(spec: str, says: str) -> None:
    with pytest.raises(ActivityAppNotFound) as refused:
        load_app(spec)
    assert str(refused.value).endswith(says.format(cwd=os.getcwd()))


@pytest.mark.parametrize(
    ("name", "source", "says"),
    [
        (
            "syntax",
            "def broken(:\n",
            "{module} has a syntax error at {module}.py line 1: invalid syntax",
        ),
        (
            "raises",
            "\nraise RuntimeError('token=hunter2')\n",
            "importing {module} raised RuntimeError at {module}.py line 2",
        ),
        (  # it was "at <frozen os> line 679", where the standard library raised it
            "stdlib",
            "import os\n\nSECRET = os.environ['WAYLINE_NO_SUCH_SETTING']\n",
            "importing {module} raised KeyError at {module}.py line 3",
        ),
        (
            "refused",
            "from engine import ActivityRegistry\napp = ActivityRegistry()\n"
            "app.workflow('w', version='1')(lambda ctx, x: None)\n",
            "{module} at {module}.py line 3: ",
        ),
        (  # called by a worker, it failed before its first line and was recorded unknown
            "no_argument",
            "from engine import ActivityRegistry\napp = ActivityRegistry()\n"
            "@app.activity('shop.charge')\ndef charge():\n    return 1\n",
            "{module} at {module}.py line 3: activity target shop.charge: handler charge() "
            "cannot be called with one argument: a handler takes the ActivityRequest, "
            "as in def charge(request)",
        ),
        (
            "not_callable",
            "from engine import ActivityRegistry\napp = ActivityRegistry()\n"
            "app.register('shop.charge', {'amount': 1})\n",
            "{module} at {module}.py line 3: activity target shop.charge: the handler is a "
            "dict, not a function taking the request",
        ),
    ],
)
def test_an_app_whose_module_fails_to_import_says_where_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str, says: str
) -> None:
    """A module that does not compile or raises as it is imported is a user's mistake,
    said in one line with its file and line (and the engine's own refusal in its words),
    never the import's traceback nor the exception's text, which may quote a secret."""
    module = f"wayline_broken_app_{name}"
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ActivityAppNotFound) as refused:
        load_app(f"{module}:app")
    message = str(refused.value)
    assert message.startswith(f"cannot load {module}:app: {says.format(module=module)}")
    assert "hunter2" not in message and "\n" not in message
