"""Every state-changing form the studio renders carries the session's CSRF token.

htmx sends the token as a header, but a form submitted before htmx has wired it (a
quick keyboard after a swap, a slow script, no JavaScript at all) posts natively with
only its own fields, and without the token in a hidden field that post is refused with
a 403. So this walks every page and htmx partial an admin can reach from the studio's
links, as a browser and as htmx would fetch them, and checks every form on each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin, urlsplit

from engine.store.store import Store
from studio.access import CSRF_FIELD
from studio.accounts import api_tokens, people
from studio.definitions import drafts
from studio.roles import Role
from tests.studio import plan_code_app
from tests.studio.live import LiveStudio, SignedInClient, definition

MAX_PAGES = 600
"""A bound on the walk, far above what the seeded team offers; reaching it fails."""
NOT_PAGES = ("/static/", "/api/", "/logout")
STATE_CHANGING = ("hx-post", "hx-put", "hx-patch", "hx-delete")
HTMX = {"HX-Request": "true"}


@dataclass
class Form:
    where: str
    method: str
    action: str
    tokens: list[str] = field(default_factory=list)


class PageParts(HTMLParser):
    """The forms (with their CSRF fields), links and htmx requests of one page."""

    def __init__(self, where: str) -> None:
        super().__init__()
        self.where = where
        self.forms: list[Form] = []
        self.links: list[str] = []
        self.htmx_writes: list[str] = []
        self._open: list[Form] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        if tag == "form":
            form = Form(self.where, found.get("method", "get").lower(), found.get("action", ""))
            self.forms.append(form)
            self._open.append(form)
        if tag == "input" and found.get("name") == CSRF_FIELD and self._open:
            self._open[-1].tokens.append(found.get("value", ""))
        if tag == "a" and "href" in found:
            self.links.append(found["href"])
        if "hx-get" in found:
            self.links.append(found["hx-get"])
        if any(attribute in found for attribute in STATE_CHANGING) and not (
            tag == "form" and found.get("method", "").lower() == "post"
        ):
            self.htmx_writes.append(f"<{tag}> on {self.where}")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self._open:
            self._open.pop()


def studio_page(base: str, link: str) -> str | None:
    """The path and query of a link to an HTML page of the studio, or None."""
    target = urlsplit(urljoin(base, link))
    if target.netloc not in ("", urlsplit(base).netloc) or target.path.startswith(NOT_PAGES):
        return None
    return target.path + (f"?{target.query}" if target.query else "")


def fetch(client: SignedInClient, path: str, htmx: bool) -> PageParts | None:
    """The page's parts, or None when the answer is not HTML (exports, event streams)."""
    with client.stream("GET", path, headers=HTMX if htmx else None) as response:
        if not response.headers.get("content-type", "").startswith("text/html"):
            return None
        response.read()
    parts = PageParts(f"{path}{' (htmx)' if htmx else ''}")
    parts.feed(response.text)
    return parts


def walk(client: SignedInClient, start: list[str]) -> list[PageParts]:
    """Every page reachable from ``start`` by links and hx-get, each fetched both ways."""
    seen = {(path, htmx) for path in start for htmx in (False, True)}
    queue = sorted(seen)
    pages = []
    while queue:
        path, htmx = queue.pop()
        parts = fetch(client, path, htmx)
        if parts is None:
            continue
        pages.append(parts)
        for link in parts.links:
            found = studio_page(str(client.base_url.join(path)), link)
            for as_htmx in (False, True):
                if found is not None and (found, as_htmx) not in seen:
                    seen.add((found, as_htmx))
                    queue.append((found, as_htmx))
        assert len(seen) <= MAX_PAGES, f"the walk passed {MAX_PAGES} pages"
    return pages


def seed(studio: LiveStudio) -> tuple[str, list[str]]:
    """A team with something behind every form: returns the admin and start pages."""
    team, second = studio.team("forms"), studio.team("forms-two")
    admin = studio.user(team, Role.ADMIN)
    studio.run(lambda store: join_team(store, admin, second))
    name = "forms.flow"
    studio.publish(team, definition(name))
    studio.publish(team, signalled("forms.signalled"))
    code = plan_code_app.app.workflows[0].document  # its drill plan page is reached too
    studio.publish(team, {**code, "name": "forms.code"})
    draft = studio.run(lambda store: drafts.create_draft(store, team, definition(name), "", "x"))
    waiting = studio.start(team, "forms.signalled")
    studio.overdue(studio.start(team, name))
    studio.user(team, Role.VIEWER)
    studio.run(lambda store: api_tokens.create_token(store, team, Role.AUTHOR, "ci", "seed", ""))
    return admin, [
        "/definitions",
        f"/drafts/{draft.draft_id}",
        f"/instances/{waiting}",
        f"/instances/{waiting}/state",  # loaded by htmx when the history is long
        "/dead-letters",
        "/settings",
        "/account",
    ]


async def join_team(store: Store, username: str, team: str) -> None:
    """A second membership, so the page header offers its team switcher."""
    found = await people.find_login(store, username)
    assert found is not None
    await people.set_membership(store, found[0].user_id, team, Role.VIEWER, "seed")


def signalled(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "version": "1",
        "mode": "orchestration",
        "steps": [
            {"name": "go", "kind": "signal", "target": "go", "timeout": "1h", "input_limit": 64}
        ],
    }


def test_every_form_that_changes_state_carries_the_csrf_token(studio: LiveStudio) -> None:
    admin, start = seed(studio)
    client = studio.client(admin)
    pages = walk(client, start)
    preview = PageParts("POST /definitions/import")
    preview.feed(client.form("/definitions/import", {"document": "{}"}).text)
    pages.append(preview)

    posts = [form for parts in pages for form in parts.forms if form.method == "post"]
    assert len(posts) > 40, "the walk found too few forms to mean anything"
    actions = {form.action.rsplit("/", 1)[-1] for form in posts}
    assert {"move", "update", "deprecate", "revoke", "resolve", "team", "logout"} <= actions
    assert any(f.action == "/definitions/forms.code/versions/1/plans" for f in posts)
    missing = [f"{f.action} on {f.where}: {f.tokens}" for f in posts if f.tokens != [client.csrf]]
    assert not missing, "forms without the session's CSRF token:\n" + "\n".join(missing)
    writes = [write for parts in pages for write in parts.htmx_writes]
    assert not writes, "htmx writes that are not post forms (no native fallback): " + str(writes)
