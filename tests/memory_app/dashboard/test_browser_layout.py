"""The frame every page shares, in chromium: the navigation on a phone, the theme that follows
the system setting, the skip link, the favicon, and what a refused form does with the focus."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser_kit import DESKTOP, PHONE, assert_fits, browser, member, open_page, shoot

pytestmark = pytest.mark.browser


@pytest.fixture
def ada(transactional_db) -> None:
    member("demo", "ada", admin=True)


def test_on_a_phone_the_navigation_folds_behind_a_menu_that_opens_and_closes(live_server, ada) -> None:
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=PHONE)
        menu = page.get_by_role("button", name="Menu")
        sessions = page.locator("#mainnav").get_by_role("link", name="Sessions")
        expect(menu).to_be_visible()
        expect(menu).to_have_attribute("aria-expanded", "false")
        expect(sessions).to_be_hidden()
        # Folded, the top bar is one short row and the page is exactly the phone's width.
        topbar = page.locator("header.topbar").bounding_box()
        assert topbar is not None and topbar["height"] < 70
        assert_fits(page)

        menu.click()
        expect(menu).to_have_attribute("aria-expanded", "true")
        expect(sessions).to_be_visible()
        expect(page.get_by_role("button", name="Log out")).to_be_visible()
        # Every item of the open menu sits inside the dark bar, readable, none past the edge.
        bar = page.locator("header.topbar").bounding_box()
        for link in page.locator("#mainnav a").all():
            box = link.bounding_box()
            assert box is not None and box["x"] + box["width"] <= PHONE["width"]
            assert bar["y"] <= box["y"] and box["y"] + box["height"] <= bar["y"] + bar["height"]
        assert_fits(page)
        shoot(page, "frame-menu-open")

        page.keyboard.press("Escape")
        expect(sessions).to_be_hidden()
        expect(menu).to_be_focused()

        sessions_box = None
        page.set_viewport_size(DESKTOP)
        expect(menu).to_be_hidden()
        expect(sessions).to_be_visible()
        sessions_box = sessions.bounding_box()
        assert sessions_box is not None and sessions_box["y"] < 40  # the nav sits in the one top row


def test_the_theme_follows_the_system_setting(live_server, ada) -> None:
    def colours(scheme: str) -> tuple[str, str, str]:
        page = open_page(opened, live_server.url, viewport=DESKTOP, color_scheme=scheme)
        found = page.evaluate(
            "() => [getComputedStyle(document.body).backgroundColor, getComputedStyle(document.body).color,"
            " getComputedStyle(document.querySelector('.topbar')).backgroundColor]"
        )
        shoot(page, f"frame-{scheme}")
        page.context.close()
        return tuple(found)

    def luminance(rgb: str) -> float:
        red, green, blue = (int(part) for part in rgb[rgb.index("(") + 1 : rgb.index(")")].split(",")[:3])
        return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255

    with browser() as opened:
        light_bg, light_ink, light_bar = colours("light")
        dark_bg, dark_ink, dark_bar = colours("dark")
    assert luminance(light_bg) > 0.9 and luminance(light_ink) < 0.2
    assert luminance(dark_bg) < 0.1 and luminance(dark_ink) > 0.85
    # The top bar is dark in both: its light text stays readable whatever the page behind it.
    assert light_bar == dark_bar and luminance(dark_bar) < 0.15


def test_the_skip_link_is_the_first_stop_and_lands_on_the_content(live_server, ada) -> None:
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=PHONE)
        page.goto(live_server.url + "/facts/")
        page.keyboard.press("Tab")
        skip = page.get_by_role("link", name="Skip to content")
        expect(skip).to_be_focused()
        box = skip.bounding_box()
        assert box is not None and box["y"] >= 0  # shown when focused, not left off-screen
        page.keyboard.press("Enter")
        expect(page.locator("main#main")).to_be_focused()


def test_the_favicon_is_served_at_the_site_root_and_linked_from_every_page(live_server, ada) -> None:
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=DESKTOP)
        missing: list[str] = []
        page.on("response", lambda response: response.status == 404 and missing.append(response.url))
        page.goto(live_server.url + "/experiences/")
        icon = page.locator("link[rel=icon]").get_attribute("href")
        assert icon and page.request.get(live_server.url + icon).ok
        root = page.request.get(live_server.url + "/favicon.ico")
        assert root.ok and root.headers["content-type"] in ("image/x-icon", "image/vnd.microsoft.icon")
        assert root.body()[:4] == b"\x00\x00\x01\x00"  # an icon file, not an HTML error page
        assert missing == []


def test_a_refused_form_puts_the_focus_on_the_first_refused_field_with_its_error_attached(live_server, ada) -> None:
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=PHONE)
        page.goto(live_server.url + "/webhooks/new/")
        page.get_by_label("URL").fill("ftp://not-a-webhook")
        page.get_by_role("button", name="Create webhook").click()

        field = page.get_by_label("URL")
        expect(field).to_be_focused()
        expect(field).to_have_attribute("aria-invalid", "true")
        described = field.get_attribute("aria-describedby") or ""
        errors = " ".join(
            page.locator(f"#{name}").inner_text() for name in described.split() if page.locator(f"#{name}").count()
        )
        assert "http" in errors.lower()
        # Styled as refused after the round trip to the server, not only while typing.
        assert field.evaluate("e => getComputedStyle(e).borderColor") != page.get_by_role(
            "textbox", name="Description"
        ).evaluate("e => getComputedStyle(e).borderColor")
        # No attribute is left empty: aria-invalid="" reads as invalid to some screen readers.
        assert page.locator('[aria-invalid=""]').count() == 0
        shoot(page, "frame-refused-form")
