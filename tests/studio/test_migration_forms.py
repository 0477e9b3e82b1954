"""The migration forms refuse what they cannot act on, before anything happens: an
instance outside the version's compatibility report (another team's, or made up),
more than a request may take, and a migration without a reason."""

from __future__ import annotations

from engine.api.client import Client
from engine.model.validation import parse_definition
from studio.definitions.migrations import MAX_MIGRATIONS_PER_REQUEST
from studio.roles import Role
from tests.studio.live import LiveStudio, definition


def test_the_forms_take_only_reported_instances_a_bounded_number_and_a_reason(
    studio: LiveStudio,
) -> None:
    team = studio.team("moves")
    name = studio.publish_new(team, "moved")
    instance_id = studio.start(team, name)
    v2 = parse_definition(definition(name, "2", timeout="45s"))
    studio.run(lambda store: Client(store).publish(v2, "seed", team))
    client = studio.client(studio.user(team, Role.OPERATOR))
    url = f"/definitions/{name}/versions/2"

    stranger = client.form(url + "/migrate/preview", {"instance": ["someone-else"]})
    assert stranger.status_code == 422
    assert f"someone-else is not in the compatibility report of {name}@2" in stranger.text
    many = [f"i-{n}" for n in range(MAX_MIGRATIONS_PER_REQUEST + 1)]
    too_many = client.form(url + "/migrate/preview", {"instance": many})
    assert too_many.status_code == 422
    assert f"at most {MAX_MIGRATIONS_PER_REQUEST} per request" in too_many.text
    chosen = {"instance": [instance_id], "bulk_id": "b1"}
    no_reason = client.form(url + "/migrate", {**chosen, "reason": " "})
    assert no_reason.status_code == 422
    assert "a reason of 1 to 500 characters is required" in no_reason.text
    unpreviewed = client.form(url + "/migrate", {"instance": [instance_id], "reason": "v2"})
    assert unpreviewed.status_code == 422 and "preview the action first" in unpreviewed.text
    state = studio.run(lambda store: Client(store).inspect(instance_id))
    assert state.definition.version == "1" and state.audit == ()
