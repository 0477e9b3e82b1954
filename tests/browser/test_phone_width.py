"""At a phone's width (390 px) no page scrolls sideways: wide tables, code and forms
scroll inside their own box or wrap, and the page itself is never wider than the
screen."""

from __future__ import annotations

from playwright.sync_api import Browser, Page, expect

from studio.roles import Role
from tests.browser.conftest import TIMEOUT_MS, settled, sign_in
from tests.studio.live import LiveStudio, definition

PHONE = {"width": 390, "height": 844}
WIDER_THAN_SCREEN = "document.scrollingElement.scrollWidth - window.innerWidth"


def phone(browser: Browser, studio: LiveStudio) -> Page:
    """A page in a new context at a phone's width."""
    context = browser.new_context(viewport=PHONE, base_url=studio.url)
    context.set_default_timeout(TIMEOUT_MS)
    return context.new_page()


def wider_than_screen(page: Page, paths: list[str]) -> dict[str, int]:
    """The paths whose page is wider than the screen, and by how many pixels."""
    overflow = {}
    for path in paths:
        page.goto(path)
        settled(page)
        overflow[path] = page.evaluate(WIDER_THAN_SCREEN)
    return {path: px for path, px in overflow.items() if px > 0}


def test_no_main_page_scrolls_sideways_at_390_px(browser: Browser, studio: LiveStudio) -> None:
    team, name, instance_id = studio.one_running("phone")
    page = phone(browser, studio)
    page.goto("/login")
    assert page.evaluate(WIDER_THAN_SCREEN) <= 0, "the sign-in page scrolls sideways"
    sign_in(page, studio.user(team, Role.ADMIN))
    page.goto("/settings")  # a token and an invitation fill the Settings page's tables
    page.get_by_label("Label").fill("ci-publish")
    page.get_by_role("button", name="Create token").click()
    page.goto("/settings")
    page.locator("#member-username").fill("phone.member")
    page.get_by_role("button", name="Invite").click()
    expect(page.locator("#invitation-code")).to_be_visible()
    pages = [
        "/definitions",
        f"/definitions/{name}",
        f"/definitions/{name}/versions/1",
        "/instances",
        "/instances/new",
        f"/instances/{instance_id}",
        "/dead-letters",
        "/drills",
        "/workers",
        "/settings",
        "/account",
    ]
    assert wider_than_screen(page, pages) == {}
    page.context.close()


def test_long_names_and_values_wrap_at_390_px(browser: Browser, studio: LiveStudio) -> None:
    team = studio.team("phonelong")
    name = "orders.fulfilment.with.a.name.far.longer.than.a.phone.screen.is.wide"
    studio.publish(team, definition(name))
    instance_id = studio.start(team, name, input={"note": "n" * 300})
    page = phone(browser, studio)
    sign_in(page, studio.user(team, Role.ADMIN))
    pages = [
        f"/definitions/{name}",
        f"/definitions/{name}/versions/1",
        "/instances?view=all",
        "/instances/new",
        f"/instances/{instance_id}",
        "/holds",
    ]
    assert wider_than_screen(page, pages) == {}
    page.context.close()


def test_a_settings_label_stays_beside_its_field_at_390_px(
    browser: Browser, studio: LiveStudio
) -> None:
    """The invite and token forms wrapped between a label and its field ("Role" at the
    end of one line, its menu on the next)."""
    team, _, _ = studio.one_running("phone-labels")
    page = phone(browser, studio)
    sign_in(page, studio.user(team, Role.ADMIN))
    page.goto("/settings")
    settled(page)
    for field in ("member-username", "member-name", "member-role", "token-label", "token-role"):
        label = page.locator(f"label[for='{field}']").bounding_box()
        control = page.locator(f"#{field}").bounding_box()
        assert label and control
        middle = label["y"] + label["height"] / 2
        assert control["y"] <= middle <= control["y"] + control["height"], field
    page.context.close()


TABLET = {"width": 768, "height": 1024}
OUT_OF_VIEW = """() => [...document.querySelectorAll("body *")].filter(e => {
  const r = e.getBoundingClientRect();
  if (!r.width || r.right <= window.innerWidth + 1 || e.closest(".visually-hidden")) return false;
  for (let p = e.parentElement; p; p = p.parentElement) {
    if (getComputedStyle(p).overflowX !== "visible" && p.scrollWidth > p.clientWidth) return false;
  }
  return true;
}).map(e => e.tagName + "#" + e.id + "." + e.className)"""
"""Elements reaching past the screen's right edge, other than inside a box that scrolls
(a graph's viewport, a tablet's table)."""
BROKEN_INSIDE_A_WORD = """(cells) => cells.flatMap(cell => {
  const text = cell.firstChild ? cell.textContent : "", breaks = [];
  const range = document.createRange();
  let top = null, at = 0;
  for (const node of [...cell.childNodes].filter(n => n.nodeType === Node.TEXT_NODE)) {
    for (let i = 0; i < node.length; i++, at++) {
      range.setStart(node, i); range.setEnd(node, i + 1);
      const line = range.getBoundingClientRect().top;
      if (top !== null && line > top + 2 && !"_.-/:@".includes(text[at - 1])) breaks.push(text);
      top = line;
    }
  }
  return breaks;
})"""
"""The event kinds whose text wraps to a new line anywhere but after a separator."""
LONG_STATES = """() => document.querySelectorAll("#steps-table td:last-child .muted")
  .forEach(note => {
    note.textContent = "attempt 1: outcome unknown, needs an operator or a retry";
  })"""
"""Every step's state as long as an unknown outcome's, the longest a state says."""
SIDEWAYS_TABLES = """() => [...document.querySelectorAll("table.stacked")]
  .filter(t => t.scrollWidth > t.clientWidth + 1).map(t => t.id)"""


def test_an_instance_reads_as_cards_at_390_px(browser: Browser, studio: LiveStudio) -> None:
    """The attempts and history tables scrolled sideways inside their cards and event
    kinds broke mid-word ("instanc" / "e_started"); each row is now a card of labelled
    lines and a kind wraps only after its underscores."""
    team, _, instance_id = studio.one_running("phonecards")
    page = phone(browser, studio)
    sign_in(page, studio.user(team, Role.VIEWER))
    for path in (f"/instances/{instance_id}", f"/instances/{instance_id}/history"):
        page.goto(path)
        settled(page)
        expect(page.locator("#history-table code.event-kind").first).to_have_text(
            "instance_started"
        )
        assert page.evaluate(OUT_OF_VIEW) == [], path
        assert page.evaluate(SIDEWAYS_TABLES) == [], path
        kinds = page.locator("#history-table code.event-kind").element_handles()
        assert page.evaluate(BROKEN_INSIDE_A_WORD, kinds) == [], path
        header = page.locator("#history-table thead").bounding_box()
        assert header is not None and header["height"] <= 1, "the headings stay for readers"
    step = page.locator("#history-table td[data-label='Step']:not(:empty)").first
    expect(step).to_be_visible()
    label = page.evaluate("(td) => getComputedStyle(td, '::before').content", step.element_handle())
    assert label == '"Step"'
    page.context.close()


def test_step_names_wrap_only_after_their_separators_at_390_px(
    browser: Browser, studio: LiveStudio, shop: str
) -> None:
    """The steps panel broke "manager_approval" as "manager_approv" / "al" beside a long
    state ("attempt 1: outcome unknown, needs an operator or a retry"), which squeezed
    the name's column."""
    instance_id = studio.start(shop, "order.fulfillment")
    page = phone(browser, studio)
    sign_in(page, studio.user(shop, Role.VIEWER))
    page.goto(f"/instances/{instance_id}")
    settled(page)
    labels = page.locator("#steps-table .step-label")
    expect(labels.filter(has_text="manager_approval")).to_have_count(1)
    page.evaluate(LONG_STATES)
    assert page.evaluate(BROKEN_INSIDE_A_WORD, labels.element_handles()) == []
    page.context.close()


def test_holds_keep_when_and_why_readable(browser: Browser, studio: LiveStudio) -> None:
    """The holds table squeezed its Placed column to a word a line (and broke words) at
    a phone's and a tablet's width."""
    team, name, _ = studio.one_running("phoneholds")
    page = phone(browser, studio)
    sign_in(page, studio.user(team, Role.OPERATOR))
    page.goto("/holds")
    page.get_by_label("Definition (NAME or NAME@VERSION)").fill(name)
    page.get_by_label("Reason").fill("Carrier API incident: pausing while the vendor looks")
    page.get_by_role("button", name="Place hold").click()
    expect(page.locator("#hold-notice")).to_contain_text("placed")
    for viewport, least in ((PHONE, 200), (TABLET, 150)):
        page.set_viewport_size(viewport)
        page.goto("/holds")
        settled(page)
        assert page.evaluate(OUT_OF_VIEW) == [], viewport
        placed = page.locator("#holds td.placed").first.bounding_box()
        assert placed is not None and placed["width"] >= least, (viewport, placed)
    page.context.close()


def test_lists_fit_a_narrow_tablet(browser: Browser, studio: LiveStudio) -> None:
    """At 768 px the workers table pushed the page 15 px sideways; it scrolls in its own
    box now, its first column kept in view, and no list reaches past the screen."""
    team, name, instance_id = studio.one_running("tablet")
    context = browser.new_context(viewport=TABLET, base_url=studio.url)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    sign_in(page, studio.user(team, Role.ADMIN))
    for path in (
        "/instances?view=all",
        f"/instances/{instance_id}",
        "/definitions",
        f"/definitions/{name}",
        "/workers",
        "/holds",
        "/dead-letters",
        "/drills",
        "/settings",
    ):
        page.goto(path)
        settled(page)
        assert page.evaluate(OUT_OF_VIEW) == [], path
    context.close()
