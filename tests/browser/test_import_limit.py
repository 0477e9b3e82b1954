"""The import form refuses a file over the limit as it is chosen, in the browser: one
over the studio's own body limit (MAX_BODY_BYTES) would otherwise be refused before the
form could say why, on an error page that lost what was pasted."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from studio.definitions.pages import UPLOAD_TOO_LARGE
from studio.roles import Role
from studio.settings import MAX_BODY_BYTES
from tests.browser.conftest import sign_in
from tests.studio.live import LiveStudio

VALIDITY = "element => element.validationMessage"


def test_a_file_too_large_is_refused_on_the_form_as_it_is_chosen(
    page: Page, studio: LiveStudio
) -> None:
    sign_in(page, studio.user(studio.team("uploaders"), Role.AUTHOR))
    page.goto("/definitions/import")
    page.get_by_label("or paste it here").fill('{"name": "kept"}')
    chooser = page.get_by_label("Choose an exported file")
    huge = {"name": "huge.json", "mimeType": "application/json", "buffer": b" " * MAX_BODY_BYTES}
    chooser.set_input_files(huge)
    assert chooser.evaluate(VALIDITY) == UPLOAD_TOO_LARGE
    posts: list[str] = []
    page.on(
        "request", lambda request: posts.append(request.url) if request.method == "POST" else None
    )
    page.get_by_role("button", name="Preview").click()  # a submit starts before click returns
    expect(chooser).to_be_focused()  # the browser keeps the form, on the field to mend
    assert posts == [], "the file was never sent"
    expect(page.get_by_label("or paste it here")).to_have_value('{"name": "kept"}')

    small = {"name": "small.json", "mimeType": "application/json", "buffer": b"{}"}
    chooser.set_input_files(small)
    assert chooser.evaluate(VALIDITY) == ""
