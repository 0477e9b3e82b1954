"""The API keeps to its OpenAPI document: schemathesis with every check, bounded.

Schemathesis reads ``/schema/openapi.json`` from a live studio and calls every API
operation with an admin's API token: examples, boundary values, random and invalid
input, and sequences that use one answer in the next request. Its checks include no
500s, only declared statuses, bodies matching their declared schemas (errors
included), valid data accepted, invalid data refused with a 4xx, 401 without the
token, and 405 with an ``Allow`` header for a method a path does not take.

The pass is bounded (a few examples per operation) and derandomized, so it takes well
under a minute and finds the same things every time. Two operations stay out of it:
``POST /api/drills/runs`` would start a drill campaign (minutes of servers killed and
restarted; tests/studio/test_drill_pages.py starts one), and ``DELETE
/api/tokens/{token_id}`` would revoke the very token the pass uses once a listing has
shown its id (tests/studio/test_route_access.py revokes one).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engine.model.instance import InstanceStatus
from studio.accounts import api_tokens, people
from studio.instances.action_offers import KINDS, RESOLUTIONS
from studio.roles import Role
from studio.routes import ROUTES
from studio.settings import BODY_TOO_LARGE, MAX_BODY_BYTES
from tests.integration.conftest import pg_dsn  # noqa: F401
from tests.studio.live import LiveStudio, definition, serve_studio
from verification.profiles import PROFILES

CONFIG = Path(__file__).with_name("schemathesis.toml")
EXAMPLES_PER_OPERATION = 5
LEFT_OUT = ("post_start_run", "delete_revoke_token")
"""Operation ids the pass leaves out (the module docstring says why)."""


@pytest.fixture
def fuzzed(pg_dsn: str) -> Iterator[LiveStudio]:  # noqa: F811
    """A studio of its own: what the pass creates (teams' drafts, tokens, definitions)
    stays out of the other tests' studio."""
    with serve_studio(pg_dsn) as live:
        yield live


def test_the_api_keeps_to_its_openapi_document(fuzzed: LiveStudio, tmp_path: Path) -> None:
    team = fuzzed.team("fuzz")
    admin = fuzzed.user(team, Role.ADMIN)
    admin_id = fuzzed.run(lambda store: people.find_login(store, admin))[0].user_id
    secret, _ = fuzzed.run(
        lambda store: api_tokens.create_token(
            store, team, Role.ADMIN, "schemathesis", admin, admin_id
        )
    )
    fuzzed.publish(team, definition(f"fuzzed.{team}"))
    fuzzed.advertise()
    fuzzed.start(team, f"fuzzed.{team}", "fuzzed-1")
    excluded = [arg for op in LEFT_OUT for arg in ("--exclude-operation-id", op)]
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(CONFIG),
        "run",
        f"{fuzzed.url}/schema/openapi.json",
        "--header",
        f"Authorization: Bearer {secret}",
        "--checks",
        "all",
        "--generation-deterministic",
        "--max-examples",
        str(EXAMPLES_PER_OPERATION),
        "--workers",
        "2",
        "--request-timeout",
        "20",
        "--no-color",
        *excluded,
    ]
    finished = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False
    )
    assert finished.returncode == 0, finished.stdout[-20_000:] + finished.stderr[-5_000:]
    me = httpx.get(fuzzed.url + "/api/me", headers={"Authorization": f"Bearer {secret}"})
    assert me.status_code == 200, "the pass must keep its token to test anything"


def test_every_api_route_declares_its_errors_with_the_body_they_have(studio: LiveStudio) -> None:
    document = httpx.get(studio.url + "/schema/openapi.json").json()
    error = {"$ref": "#/components/schemas/ErrorOut"}
    for route in ROUTES:
        if not route.is_api:
            continue
        path = route.path.replace(":str}", "}")
        responses = document["paths"][path][route.method.lower()]["responses"]
        for status in route.error_statuses:
            declared = responses[str(status)]["content"]["application/json"]
            assert declared["schema"] == error, (route.method, path, status)
            (example,) = declared["examples"].values()
            assert example["value"]["error"], (route.method, path, status)
    actions = document["paths"]["/api/instances/{ref}/actions"]["post"]["responses"]
    assert {"401", "403", "404", "409", "413", "422"} <= set(actions)
    problem = document["components"]["schemas"]["ErrorProblem"]
    assert set(problem["required"]) == {"path", "message"}


def test_closed_sets_of_values_are_listed_in_the_document(studio: LiveStudio) -> None:
    schemas = httpx.get(studio.url + "/schema/openapi.json").json()["components"]["schemas"]

    def choices(schema: str, field: str) -> set[str]:
        return set(schemas[schema]["properties"][field]["enum"]) - {None}

    assert choices("CommandIn", "action") == {a.value for a in KINDS}
    assert choices("CommandIn", "resolution") == set(RESOLUTIONS)
    assert choices("ResolveIn", "action") == {"retry", "discard"}
    assert choices("DrillStartIn", "profile") == set(PROFILES)
    assert choices("TokenIn", "role") == choices("MemberOut", "role") == {r.value for r in Role}
    assert choices("InstanceOut", "status") == {s.label for s in InstanceStatus}
    assert choices("DrillRunOut", "status") == {"running", "passed", "failed", "error", "stopped"}


def test_a_wrong_method_is_answered_with_the_methods_the_path_takes(studio: LiveStudio) -> None:
    refused = httpx.request("PATCH", studio.url + "/api/tokens")
    assert refused.status_code == 405
    assert set(refused.headers["allow"].split(", ")) == {"GET", "POST", "OPTIONS"}
    assert refused.json()["error"].endswith("it takes OPTIONS, GET, POST")
    options = httpx.options(studio.url + "/api/drafts/some-draft")
    assert options.status_code == 204
    assert set(options.headers["allow"].split(", ")) == {"GET", "PUT", "DELETE", "OPTIONS"}


def test_a_missing_parameter_or_a_value_outside_its_set_is_named(studio: LiveStudio) -> None:
    team = studio.team()
    client = studio.client(studio.user(team, Role.ADMIN))
    client.headers["X-CSRF-Token"] = client.csrf
    missing = client.get("/api/definitions/anything/diff", params={"left": "1"})
    assert missing.status_code == 400
    assert missing.json()["error"] == "Missing required query parameter 'right'"
    outside = client.post("/api/tokens", json={"label": "ci", "role": "owner"})
    assert outside.status_code == 400
    (problem,) = outside.json()["problems"]
    assert problem["path"] == "role" and "owner" in problem["message"], problem


def test_request_bodies_carry_examples_that_keep_to_their_schemas(studio: LiveStudio) -> None:
    schemas = httpx.get(studio.url + "/schema/openapi.json").json()["components"]["schemas"]
    exemplified = {name: schema for name, schema in schemas.items() if "examples" in schema}
    inputs = {"StartIn", "SignalIn", "CommandIn", "ResolveIn", "DrillStartIn", "TokenIn"}
    assert inputs | {"DraftEditIn"} <= set(exemplified)
    for name, schema in exemplified.items():
        for example in schema["examples"]:
            assert set(schema.get("required", ())) <= set(example), name
            for field, value in example.items():
                allowed = schema["properties"][field].get("enum")
                assert allowed is None or value in allowed, (name, field, value)


def test_a_body_over_the_limit_is_refused_with_the_declared_error(studio: LiveStudio) -> None:
    team = studio.team()
    client = studio.client(studio.user(team, Role.AUTHOR))
    client.headers["X-CSRF-Token"] = client.csrf
    oversized = {"document": {"name": "x" * MAX_BODY_BYTES}}
    refused = client.post("/api/definitions", json=oversized)
    assert refused.status_code == 413
    assert refused.json() == {"error": BODY_TOO_LARGE, "problems": []}
    assert "4,000,000 bytes" in BODY_TOO_LARGE
