"""Declaring code workflows on an app: ``@app.workflow(name, version=...)``."""

from __future__ import annotations

import pytest

from engine import ActivityRegistry
from engine.model.definitions import Mode, definition_document, definition_to_json
from engine.model.validation import parse_definition
from engine.modes.code.declaration import CodeWorkflow


async def order_saga(ctx, order):
    await ctx.step("reserve", lambda: order, retries=3)
    return order


async def no_ctx():
    return None


def test_the_decorator_registers_the_function_and_returns_it_unchanged() -> None:
    app = ActivityRegistry()
    assert app.workflow("order-saga", version="1")(order_saga) is order_saga
    flow = app.workflow_for("order-saga", "1")
    assert isinstance(flow, CodeWorkflow)
    assert app.workflows == [flow]
    assert (flow.module, flow.qualname) == (__name__, "order_saga")
    assert str(flow) == "order-saga@1"
    assert app.workflow_for("order-saga", "2") is None


def test_a_name_and_version_declared_twice_is_refused() -> None:
    app = ActivityRegistry()
    app.workflow("order-saga", version="1")(order_saga)
    app.workflow("order-saga", version="2")(order_saga)
    with pytest.raises(ValueError, match="workflow order-saga@1 is declared twice"):
        app.workflow("order-saga", version="1")(order_saga)


def test_one_worker_runs_several_apps_and_refuses_what_two_declare() -> None:
    shop, sagas = ActivityRegistry(), ActivityRegistry()
    shop.register("payments.charge", lambda request: {"ok": True})
    sagas.workflow("order-saga", version="1")(order_saga)
    both = ActivityRegistry.combined(shop, sagas)
    assert both.get("payments.charge") is shop.get("payments.charge")
    assert both.workflows == sagas.workflows
    assert both.targets == ["payments.charge", "workflow:order-saga@1"]
    with pytest.raises(ValueError, match="workflow order-saga@1 is declared twice"):
        ActivityRegistry.combined(sagas, sagas)


def test_a_workflow_must_be_an_async_def_with_a_valid_name_and_version() -> None:
    app = ActivityRegistry()
    with pytest.raises(TypeError, match="must be an async def") as refused:
        app.workflow("sync", version="1")(lambda ctx, order: order)
    assert str(refused.value) == (
        "workflow sync@1: test_a_workflow_must_be_an_async_def_with_a_valid_name_and_version"
        ".<locals>.<lambda> must be an async def"
    ), "named as in the source, not by its repr and address"
    with pytest.raises(TypeError, match=r"workflow bare@1: no_ctx must take \(ctx, input\)"):
        app.workflow("bare", version="1")(no_ctx)
    with pytest.raises(ValueError, match="workflow name must be 1 to"):
        app.workflow("a/b", version="1")(order_saga)
    with pytest.raises(ValueError, match="workflow version must be 1 to"):
        app.workflow("ok", version="v:1")(order_saga)


def test_the_document_is_a_code_definition_that_reads_back_to_the_same_fingerprint() -> None:
    app = ActivityRegistry()
    app.workflow("order-saga", version="1")(order_saga)
    flow = app.workflows[0]
    document = flow.document
    assert document["mode"] == "code"
    assert set(document) == {
        "name", "version", "mode", "deprecated", "module", "function", "code", "outline"
    }  # fmt: skip
    assert document["function"] == "order_saga"
    assert document["outline"][0]["line"] == 14
    again = parse_definition(document)
    assert again.mode is Mode.CODE
    assert again.fingerprint == flow.fingerprint
    assert definition_to_json(again) == document
    assert "line" not in definition_document(again)["outline"][0]
