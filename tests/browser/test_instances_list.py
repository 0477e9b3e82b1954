"""The instances list as an operator searches it: newest first, any column sorts with a
click (and again the other way), an id's start finds its instances, and every filter
and the order live in the URL, so a reload or a shared link shows the same list."""

from __future__ import annotations

import re
import uuid

from playwright.sync_api import Page, expect

from engine.decide.operator_actions import Action
from studio.roles import Role
from tests.browser.conftest import sign_in
from tests.studio.live import LiveStudio, definition


def shown(page: Page) -> list[str]:
    return page.locator("#instances-table tbody tr td:nth-child(2) code").all_inner_texts()


def test_newest_first_sort_by_column_and_search_by_id_start(page: Page, studio: LiveStudio) -> None:
    team = studio.team("listui")
    name = f"listui.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    first, second, third = (studio.start(team, name, f"{n}-{name}") for n in ("b1", "a1", "b2"))
    studio.command(second, Action.TERMINATE)
    sign_in(page, studio.user(team, Role.OPERATOR))

    page.goto(f"/instances?view=all&definition={name}")
    expect(page.locator("#instances-table tbody tr")).to_have_count(3)
    assert shown(page) == [third, second, first]  # newest first

    page.locator("#instances-table thead").get_by_role("button", name="Instance").click()
    expect(page).to_have_url(re.compile(r"sort=id"))
    assert shown(page) == [second, first, third]
    expect(page.locator("#instances-table th[aria-sort='ascending']")).to_contain_text("Instance")
    page.locator("#instances-table thead").get_by_role("button", name="Instance").click()
    expect(page).to_have_url(re.compile(r"sort=-id"))
    assert shown(page) == [third, first, second]

    page.get_by_label("Instance id").fill("b")
    page.get_by_role("button", name="Filter", exact=True).click()
    expect(page).to_have_url(re.compile(r"instance=b.*sort=-id|sort=-id.*instance=b"))
    expect(page.locator("#instances-table tbody tr")).to_have_count(2)
    assert shown(page) == [third, first]

    page.get_by_label("Status").select_option("terminated")
    page.get_by_label("Instance id").fill("")
    page.get_by_role("button", name="Filter", exact=True).click()
    expect(page.locator("#instances-table tbody tr")).to_have_count(1)
    page.reload()
    assert shown(page) == [second]
    expect(page.get_by_label("Status")).to_have_value("terminated")
    expect(page.get_by_label("Definition", exact=True)).to_have_value(name)


def test_the_list_opens_with_the_persons_last_view(page: Page, studio: LiveStudio) -> None:
    team = studio.team("savedview")
    name = f"saved.{uuid.uuid4().hex[:6]}"
    studio.publish(team, definition(name))
    kept = studio.start(team, name, f"kept-{name}")
    studio.start(team, name, f"other-{name}")
    operator = studio.user(team, Role.OPERATOR)
    sign_in(page, operator)
    page.goto("/instances")
    page.get_by_label("Instance id").fill("kept")
    page.get_by_role("button", name="Filter", exact=True).click()
    expect(page.locator("#instances-table tbody tr")).to_have_count(1)

    page.get_by_role("link", name="Definitions").first.click()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Instances").click()
    expect(page).to_have_url(re.compile(r"instance=kept"))
    assert shown(page) == [kept]

    page.get_by_role("button", name="Clear").click()  # a view of its own, remembered too
    expect(page.locator("#instances-table tbody tr")).to_have_count(2)
    page.goto("/instances")
    expect(page.locator("#instances-table tbody tr")).to_have_count(2)

    page.locator("#instances-table thead").get_by_role("button", name="Instance").click()
    expect(page).to_have_url(re.compile(r"sort=id"))  # a heading chose the order: kept
    page.goto(f"/instances?view=all&instance=other-{name}")  # a link: shown, not kept
    assert shown(page) == [f"other-{name}"]
    page.goto("/instances")
    expect(page).to_have_url(re.compile(r"view=active&sort=id$"))
    assert shown(page) == [kept, f"other-{name}"]
