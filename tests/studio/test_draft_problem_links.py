"""The editor's lists of problems over HTTP: each names and links the step it concerns,
a step without a name included (it was listed as the definition's, with no link)."""

from __future__ import annotations

import re

from studio.definitions import drafts
from studio.roles import Role
from tests.studio.live import LiveStudio, definition


def test_a_step_without_a_name_is_named_by_position_and_linked(
    studio: LiveStudio, team: str
) -> None:
    document = definition("unnamed.step")
    document["steps"].append({"kind": "approval", "timeout": "1h", "input_limit": 10})
    draft = studio.run(lambda store: drafts.create_draft(store, team, document, "", "x"))
    author = studio.client(studio.user(team, Role.AUTHOR))
    base = f"/drafts/{draft.draft_id}"
    page = author.get(base).text
    link = f'<a href="{base}?step=%236" hx-get="{base}?step=%236"'
    pill = re.search(r'id="draft-problems">.*?</details>', page, re.S)
    panel = re.search(r'id="problems">.*?</ul>', page, re.S)
    assert pill and panel
    for listed in (pill.group(0), panel.group(0)):
        assert listed.count(link) == 2, listed  # name and target, each linked
        assert "step 7</a>" in listed and "definition" not in listed
    chosen = author.get(f"{base}?step=%236").text
    assert 'id="field-name"' in chosen and "is required" in chosen
