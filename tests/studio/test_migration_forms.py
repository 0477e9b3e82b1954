"""The migration forms refuse what they cannot act on, before anything happens: an
instance outside the version's compatibility report (another team's, or made up),
more than a request may take, and a migration without a reason."""

from __future__ import annotations

import re
from html import unescape

from engine.api.client import Client
from engine.decide.migrations import reason_room
from engine.decide.operator_actions import Action
from engine.model.identifiers import team_instance_id
from engine.model.limits import MAX_REASON_LENGTH
from studio.definitions.migrations import MAX_MIGRATIONS_PER_REQUEST
from studio.roles import Role
from tests.studio.live import LiveStudio, SignedInClient, definition


def test_the_forms_take_only_reported_instances_a_bounded_number_and_a_reason(
    studio: LiveStudio,
) -> None:
    team, name, instance_id = studio.one_running("moves")
    studio.publish_judged(team, definition(name, "2", timeout="45s"))
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


def test_a_refused_migration_form_comes_back_with_what_was_ticked_and_typed(
    studio: LiveStudio,
) -> None:
    """Not an error page: the version's page (or the preview) again, 422, the reason
    beside the form that was refused, and every box still ticked, the reason still typed."""
    team, name, instance_id = studio.one_running("removes")
    studio.publish_judged(team, definition(name, "2", timeout="45s"))
    studio.declare_migration(name, "v2 waits longer")
    client = studio.client(studio.user(team, Role.OPERATOR))
    url = f"/definitions/{name}/versions/2"
    box = re.compile(rf'name="instance" value="{re.escape(instance_id)}"[^>]*>')

    shown = client.get(url).text
    assert 'id="migrate-error"' not in shown and "checked" not in box.search(shown).group(0)
    nothing = client.form(url + "/migrate/preview")
    assert nothing.status_code == 422 and 'id="migrate-form"' in nothing.text
    error = re.search(r'id="migrate-error">([^<]*)<', nothing.text).group(1)
    assert error == (
        "no instance was ticked: tick the compatible instances to migrate in the report "
        f"above (1 to {MAX_MIGRATIONS_PER_REQUEST} at a time)"
    )
    many = [instance_id, *(f"i-{n}" for n in range(MAX_MIGRATIONS_PER_REQUEST))]
    too_many = client.form(url + "/migrate/preview", {"instance": many})
    assert too_many.status_code == 422 and 'id="migrate-error"' in too_many.text
    assert "checked" in box.search(too_many.text).group(0), "what was ticked stays ticked"

    preview = client.form(url + "/migrate/preview", {"instance": [instance_id]})
    assert preview.status_code == 200 and 'id="confirm-migration"' in preview.text
    bulk_id = re.search(r'name="bulk_id" value="(\w+)"', preview.text).group(1)
    long_reason = "because " * 70
    chosen = {"instance": [instance_id], "bulk_id": bulk_id, "reason": long_reason}
    too_long = client.form(url + "/migrate", chosen)
    assert too_long.status_code == 422 and 'id="confirm-migration"' in too_long.text
    assert f"a reason of 1 to {MAX_REASON_LENGTH} characters is required" in too_long.text
    assert f"{long_reason}</textarea>" in too_long.text
    assert f'name="bulk_id" value="{bulk_id}"' in too_long.text, "a repeat still acts once"
    state = studio.run(lambda store: Client(store).inspect(instance_id))
    assert state.definition.version == "1" and state.audit == ()


def test_a_refused_edge_declaration_comes_back_beside_its_reason(studio: LiveStudio) -> None:
    """A reason of spaces passes the browser's `required`: the version's page comes back
    (422, never an error page) with the reason beside that edge's field, as typed, and
    no edge is declared."""
    team, name, _ = studio.one_running("edges")
    studio.publish_judged(team, definition(name, "2", timeout="45s"))
    client = studio.client(studio.user(team, Role.OPERATOR))
    url = f"/definitions/{name}/versions/2"

    refused = client.form(url + "/edges", {"from_version": "1", "reason": "   "})

    assert refused.status_code == 422
    assert '<p class="field-error" id="edge-reason-error-1" role="alert">' in refused.text
    assert f"a reason of 1 to {MAX_REASON_LENGTH} characters" in refused.text
    assert re.search(r'id="edge-reason-1"[^>]*value="   "[^>]*aria-invalid="true"', refused.text)
    assert "Declare edge v1 → v2" in client.get(url).text, "nothing was declared"


def previewed_v2(
    studio: LiveStudio, team: str, name: str, instance_id: str
) -> tuple[SignedInClient, str, str]:
    """An operator's client, version 2's address and the bulk id of a migration preview
    of ``instance_id`` to it (published judged, with a declared edge from 1)."""
    studio.publish_judged(team, definition(name, "2", timeout="45s"))
    studio.declare_migration(name, "v2 waits longer")
    client = studio.client(studio.user(team, Role.OPERATOR))
    url = f"/definitions/{name}/versions/2"
    preview = client.form(url + "/migrate/preview", {"instance": [instance_id]})
    bulk_id = re.search(r'name="bulk_id" value="(\w+)"', preview.text).group(1)
    return client, url, bulk_id


def test_an_instance_refused_as_it_is_migrated_is_told_why_once(studio: LiveStudio) -> None:
    """One that ended since the preview is refused on the results page by the judge's
    reason alone: its row names it as the team knows it, so the reason neither repeats
    the id nor shows the stored ``team:id`` (it said ``team-1:order-7: it is terminated``)."""
    team = studio.team("refusal")
    name = studio.publish_new(team, "refusal")
    stored = studio.start(team, name, team_instance_id(team, "order-7"))
    client, url, bulk_id = previewed_v2(studio, team, name, stored)
    studio.command(stored, Action.TERMINATE)

    done = client.form(url + "/migrate", {"instance": [stored], "bulk_id": bulk_id, "reason": "v2"})
    assert done.status_code == 200
    text = unescape(done.text)
    assert (
        "it is terminated: only a running or paused instance can move; "
        f"it was not migrated to {name}@2" in text
    )
    assert stored not in re.sub(r'(value|href)="[^"]*"', "", text), "only in its links"
    state = studio.run(lambda store: Client(store).inspect(stored))
    assert state.definition.version == "1"


def test_a_refused_migration_reason_is_said_beside_the_reason_field(studio: LiveStudio) -> None:
    """A reason of spaces passes the browser's `required`: the preview comes back with
    the refusal beside the reason field, which is marked invalid, described by it and
    focused, as the bulk preview's is (it was an alert above the preview, and the field
    said nothing)."""
    team, name, instance_id = studio.one_running("blank")
    client, url, bulk_id = previewed_v2(studio, team, name, instance_id)

    chosen = {"instance": [instance_id], "bulk_id": bulk_id, "reason": "   "}
    refused = client.form(url + "/migrate", chosen)

    assert refused.status_code == 422
    assert 'id="migration-error"' not in refused.text, "said once, beside its field"
    said = re.search(
        r'<p class="field-error" id="migration-reason-error" role="alert">([^<]*)<', refused.text
    )
    assert said and said.group(1) == f"a reason of 1 to {MAX_REASON_LENGTH} characters is required"
    field = re.search(r'<textarea id="migration-reason"[^>]*>', refused.text).group(0)
    assert 'aria-invalid="true"' in field and 'aria-describedby="migration-reason-error"' in field
    assert "autofocus" in field


def test_the_reason_box_holds_as_much_as_a_migration_can_record(studio: LiveStudio) -> None:
    """The reason box stopped at 400 characters, while a migration takes what the
    versions it names leave of MAX_REASON_LENGTH (its refusal says how many): the box
    now stops exactly there."""
    team, name, instance_id = studio.one_running("room")
    client, url, _ = previewed_v2(studio, team, name, instance_id)
    preview = client.form(url + "/migrate/preview", {"instance": [instance_id]})
    field = re.search(r'<textarea id="migration-reason"[^>]*>', preview.text).group(0)
    state = studio.run(lambda store: Client(store).inspect(instance_id))
    target = studio.run(lambda store: Client(store).startable(name, "2"))
    room = reason_room(state.definition, target.ref)
    assert f'maxlength="{room}"' in field
    assert 400 < room < MAX_REASON_LENGTH
