"""The import form: a file larger than a definition may be is refused on the form itself
(422, the limit named, what was pasted kept), never with an error page."""

from __future__ import annotations

import re

from studio.definitions.pages import MAX_UPLOAD_BYTES
from studio.roles import Role
from tests.studio.live import LiveStudio


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
