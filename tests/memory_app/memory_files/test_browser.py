"""End to end in Debian's chromium, at phone and desktop width: from the nav's Memory files link to
the team's files, into one file with its history, a version's diff, an edit and a revert.

Screenshots: var/screenshots/memory-files-{390,1280}.png and memory-file-{390,1280}.png.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from memory_app.memory_files import services as memory_files
from tests.browser_kit import DESKTOP, PHONE, browser, check_page, member, nav_link, open_page

pytestmark = pytest.mark.browser
PATH = "/memories/notes/auth-refactor.md"


@pytest.fixture
def files(transactional_db) -> None:
    """Built before Playwright starts its event loop, so the ORM runs in a plain thread."""
    team, _ = member()
    developer = memory_files.Owner(team=team, agent="developer", author="developer")
    for command in (
        {"command": "create", "path": PATH, "file_text": "# Auth refactor\n- login uses md5\n- tests are slow\n"},
        {"command": "str_replace", "path": PATH, "old_str": "md5", "new_str": "bcrypt"},
    ):
        memory_files.memory_file_command(owner=developer, command=command)  # type: ignore[arg-type]
    shared = memory_files.Owner(team=team, agent="", author="key:abc123")
    memory_files.memory_file_command(
        owner=shared, command={"command": "create", "path": "/memories/runbooks/deploy.md", "file_text": "Ship.\n"}
    )


def test_a_member_reads_compares_edits_and_reverts_a_memory_file(live_server, files) -> None:
    with browser() as opened:
        for viewport in (DESKTOP, PHONE):  # the edits at phone width, the harder one to use
            page = open_page(opened, live_server.url, viewport=viewport)
            nav_link(page, "Memory files").click()
            expect(page.get_by_role("heading", name="Memory files in demo")).to_be_visible()
            table = page.get_by_role("table", name="Memory files of demo")
            expect(table.get_by_role("rowheader")).to_have_count(2)
            check_page(page, "memory-files")

            table.get_by_role("link", name=PATH).click()
            expect(page.get_by_role("heading", name=PATH)).to_be_visible()
            expect(page.get_by_role("list", name=f"Lines of {PATH}")).to_contain_text("- login uses bcrypt")
            diff = page.get_by_label("Unified diff of version 2")
            expect(diff.locator(".d-del")).to_have_text(["-- login uses md5"])
            expect(diff.locator(".d-add")).to_have_text(["+- login uses bcrypt"])
            check_page(page, "memory-file")

        page.get_by_text("Edit", exact=True).click()
        page.get_by_role("textbox", name="Text").fill("# Auth refactor\n- login uses bcrypt\n- tests run in 3 s\n")
        page.get_by_role("button", name="Save as version 3").click()
        expect(page.get_by_role("list", name=f"Lines of {PATH}")).to_contain_text("- tests run in 3 s")
        expect(page.get_by_role("table", name=f"Versions of {PATH}, newest first")).to_contain_text("user:ada")

        page.get_by_role("button", name="Revert to v1").click()
        expect(page.get_by_role("list", name=f"Lines of {PATH}")).to_contain_text("- login uses md5")
        expect(page.get_by_text("is back to the text of version 1 (now version 4)")).to_be_visible()
        check_page(page, "memory-file-reverted")
