"""The import form: a file larger than a definition may be is refused on the form itself
(422, the limit named, what was pasted kept), never with an error page."""

from __future__ import annotations

import json
import re

from studio.definitions.pages import MAX_UPLOAD_BYTES
from studio.roles import Role
from tests.studio.live import LiveStudio, definition


def test_a_file_over_the_limit_shows_the_form_again_with_the_limit(studio: LiveStudio) -> None:
    author = studio.client(studio.user(studio.team("importers"), Role.AUTHOR))
    pasted = '{"name": "kept", "version": "1"}'
    large = b'{"name": "' + b"x" * MAX_UPLOAD_BYTES + b'"}'
    answer = author.post(
        "/definitions/import",
        data={"_csrf": author.csrf, "document": pasted},
        files={"file": ("huge.json", large, "application/json")},
    )
    assert answer.status_code == 422
    assert 'id="import-text"' in answer.text, "the form again, not an error page"
    error = re.search(r'id="import-error">([^<]*)<', answer.text).group(1)
    assert error == (
        f"the chosen file is larger than the {MAX_UPLOAD_BYTES:,} bytes a definition file "
        "may have; choose a smaller file"
    )
    assert "&#34;name&#34;: &#34;kept&#34;, &#34;version&#34;: &#34;1&#34;}</textarea>" in (
        answer.text
    )


def test_the_preview_says_a_name_another_team_owns_is_taken(studio: LiveStudio) -> None:
    """Not "Valid" with a Publish button that then refuses it: the preview says the name
    belongs to another team and offers a draft (where it can be renamed) only."""
    theirs = studio.team("import-owner")
    name = f"taken.{theirs}"
    studio.publish(theirs, definition(name))
    author = studio.client(studio.user(studio.team("importers"), Role.AUTHOR))
    document = json.dumps(definition(name, "2"))
    answer = author.post("/definitions/import", data={"_csrf": author.csrf, "document": document})
    assert answer.status_code == 200
    preview = answer.text[answer.text.index('id="import-preview"') :]
    assert "Valid" not in preview
    said = re.search(r'id="import-taken">(.*?)</p>', preview).group(1)
    assert re.sub("<[^>]+>", "", said).startswith(f"The name {name} belongs to another team")
    assert 'value="publish"' not in preview
    assert 'value="draft"' in preview

    own = json.dumps(definition(f"free.{theirs}"))
    answer = author.post("/definitions/import", data={"_csrf": author.csrf, "document": own})
    preview = answer.text[answer.text.index('id="import-preview"') :]
    assert "Valid" in preview and 'value="publish"' in preview
