"""End to end in Debian's chromium: write, edit, approve and diff an experience, review the queue,
try a selection with the offline backend, import and export YAML, and the settings page.

Run alone with `pytest -m browser`. Screenshots of every page land in var/screenshots/experiences_*.png.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from playwright.sync_api import expect, sync_playwright

from experiences_app.models import Experience, SelectionLog
from memory_app.conversations import services as memory_services
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import TeamMembership
from tests.experiences_app.conftest import add_experience
from tests.memory_app.conversations.test_browser import CHROMIUM, LAUNCH_ARGS, PASSWORD

pytestmark = pytest.mark.browser

SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"
FILE_WHEN = "Use when user requests file operations or FileNotFoundError occurred."
FILE_WHAT = "Always check os.path.exists() before reading files."


@pytest.fixture
def team(transactional_db, settings) -> str:
    """A team with approved and draft experiences, a session, one past selection; curator user grace."""
    settings.LLM_BACKEND = ""
    settings.LLM_BASE_URL = ""  # the offline backend selects
    team = tenancy.team_get_or_create(name="demo")
    curator = get_user_model().objects.create_user("grace", password=PASSWORD)
    TeamMembership.objects.create(team=team, user=curator, is_admin=True)
    add_experience(
        team, "plot-style", when="Use when the user asks for a chart or plot of data.", what="Label both axes."
    )
    add_experience(
        team, "plan-briefly", when="Use when planning a multi-step task.", what="Keep plans short.", who=["Planner"]
    )
    add_experience(
        team,
        "retry-network",
        when="Use when a network request times out or fails.",
        what="Retry with backoff.",
        status="draft",
    )
    SelectionLog.objects.create(
        team=team,
        role="Planner",
        query="plan and plot",
        candidates=[{"exp_id": "plot-style", "when": "w"}, {"exp_id": "plan-briefly", "when": "w"}],
        selected=["plot-style"],
    )
    session = memory_services.session_create(team=team, external_id="csv-chat")
    memory_services.message_append(
        session=session, messages=[{"role": "user", "content": "Opening data.csv raised FileNotFoundError."}]
    )
    return str(session.pk)


def shot(page, name: str) -> None:
    page.screenshot(path=str(SCREENSHOTS / f"experiences_{name}.png"), full_page=True)


def test_staff_write_review_try_and_move_experiences_in_the_browser(live_server, team: str, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: apt-get update && apt-get install -y chromium")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 950}, accept_downloads=True)
            page.goto(live_server.url + "/accounts/login/")
            page.get_by_label("Username").fill("grace")
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Log in").click()

            # The list, with its usage counts.
            page.get_by_role("navigation", name="Main").get_by_role("link", name="Experiences").click()
            expect(page.get_by_role("heading", name="Experiences")).to_be_visible()
            expect(page.locator("tr.exp-row")).to_have_count(3)
            expect(page.locator("#exp-plot-style .selected-counts")).to_have_text("1 · 1")
            expect(page.locator(".subnav .count-badge")).to_have_text("1")  # one draft to review
            shot(page, "list")

            # Create, with validation as you type and the live YAML preview.
            page.get_by_role("link", name="New experience").click()
            page.get_by_label("exp_id").fill("file validation")
            expect(page.locator('[data-errors-for="exp_id"]')).to_contain_text("must be a slug")
            page.get_by_label("exp_id").fill("plot-style")
            expect(page.locator('[data-errors-for="exp_id"]')).to_have_text("already exists")
            page.get_by_label("exp_id").fill("file-validation")
            page.get_by_label("CodeInterpreter", exact=True).check()  # a role the team's settings know
            page.locator("#id_when").fill(FILE_WHEN)
            page.get_by_label("what").fill(FILE_WHAT)
            expect(page.locator('[data-errors-for="exp_id"]')).to_be_empty()
            expect(page.locator("#exp-validity")).to_have_text("✓ valid")
            expect(page.locator("#yaml-file-name")).to_have_text("handcrafted_exp_file-validation.yaml")
            expect(page.locator("#yaml-preview")).to_have_text(
                f"exp_id: file-validation\nwho:\n  - CodeInterpreter\nwhen: |\n  {FILE_WHEN}\nwhat: |\n  {FILE_WHAT}\n"
            )
            shot(page, "form")
            page.get_by_role("button", name="Create draft").click()
            expect(page.locator(".flash")).to_contain_text("Created file-validation as a draft")
            expect(page.locator(".exp-head .exp-status")).to_have_text("Draft r1, not served")

            # Edit: a second revision.
            page.get_by_role("link", name="Edit", exact=True).click()
            expect(page.locator("#yaml-preview")).to_contain_text("exp_id: file-validation")
            page.get_by_label("what").fill(FILE_WHAT + "\nPrint the path you tried.")
            page.get_by_label("Note").fill("say which path")
            expect(page.locator("#yaml-preview")).to_contain_text("Print the path you tried.")
            shot(page, "edit")
            page.get_by_role("button", name="Save revision").click()
            expect(page.locator(".flash")).to_contain_text("Saved revision 2 of file-validation")

            # Approve (curator), then diff r1 against r3.
            page.get_by_role("button", name="Approve").click()
            expect(page.locator(".flash")).to_contain_text("Approved file-validation")
            expect(page.locator(".exp-head .exp-status")).to_have_text("Approved r3 serving")
            expect(page.locator(".exp-reviewer")).to_contain_text("user:grace")
            expect(page.locator("#exp-diff ins")).to_have_text(["approved"])  # r2 -> r3 by default
            page.get_by_label("From", exact=True).select_option("1")
            page.get_by_label("To", exact=True).select_option("3")
            page.get_by_role("button", name="Compare").click()
            expect(page.locator("#exp-diff .wd-add", has_text="Print the path you tried.")).to_have_count(1)
            expect(page.locator("#exp-diff .wd-del", has_text="draft")).to_have_count(1)
            expect(page.locator("tr.revision-row")).to_have_count(3)
            shot(page, "detail")

            # The review queue: approve the waiting draft from the queue.
            page.get_by_role("link", name="Experiences", exact=True).first.click()
            page.get_by_role("link", name="Review queue").click()
            card = page.locator("article.review-card")
            expect(card).to_have_count(1)
            expect(card).to_contain_text("retry-network")
            shot(page, "review")
            card.get_by_role("button", name="Approve").click()
            expect(page.locator(".flash")).to_contain_text("Approved retry-network")
            expect(page.locator("article.review-card")).to_have_count(0)
            expect(page.locator(".subnav .count-badge")).to_have_count(0)

            # Try selection with the team's session as the context (offline backend).
            page.get_by_role("link", name="Try selection").click()
            page.get_by_label("Role", exact=True).fill("CodeInterpreter")
            page.get_by_label("Session").select_option(team)  # csv-chat
            page.get_by_label("Query").fill("read the file again")
            page.get_by_role("button", name="Run selection").click()
            expect(page.locator("tr.candidate")).to_have_count(3)  # file-validation, plot-style, retry-network
            expect(page.locator("tr.candidate.chosen")).to_have_count(1)
            expect(page.locator("tr.candidate.chosen")).to_contain_text("file-validation")
            expect(page.locator(".prompt-text")).to_contain_text(FILE_WHEN)
            expect(page.locator(".prompt-text")).to_contain_text("Opening data.csv raised FileNotFoundError.")
            expect(page.locator(".prompt-text")).not_to_contain_text(FILE_WHAT)  # only `when` goes to the LLM
            expect(page.locator(".parsed-result")).to_have_text('["file-validation"]')
            expect(page.locator(".injected-text")).to_contain_text("Print the path you tried.")
            expect(page.locator(".raw-response")).not_to_be_empty()
            shot(page, "try")

            # Import two files (one broken), then download everything as a zip.
            page.get_by_role("link", name="Import / export").click()
            page.get_by_label("Files").set_input_files(
                [
                    {
                        "name": "handcrafted_exp_sql.yaml",
                        "mimeType": "application/x-yaml",
                        "buffer": b"exp_id: sql-safety\nwho:\n  - CodeInterpreter\nwhen: |\n  Use when writing SQL.\n"
                        b"what: |\n  Use bound parameters.\n",
                    },
                    {"name": "handcrafted_exp_bad.yaml", "mimeType": "application/x-yaml", "buffer": b"exp_id: [bad\n"},
                ]
            )
            page.get_by_role("button", name="Import").click()
            expect(page.locator(".report-created dd")).to_have_text("1")
            expect(page.locator(".report-rejected dd")).to_have_text("1")
            expect(page.locator("table.report-rejected")).to_contain_text("handcrafted_exp_bad.yaml")
            expect(page.locator("table.report-created")).to_contain_text("sql-safety")
            shot(page, "import")
            with page.expect_download() as download_info:
                page.get_by_role("link", name="Download all (zip)").click()
            archive = tmp_path / download_info.value.suggested_filename
            download_info.value.save_as(archive)
            assert archive.name == "experiences-demo.zip"
            with zipfile.ZipFile(io.BytesIO(archive.read_bytes())) as zipped:
                names = zipped.namelist()
                exported = zipped.read("handcrafted_exp_file-validation.yaml").decode()
            assert names == [
                f"handcrafted_exp_{exp_id}.yaml"
                for exp_id in ("file-validation", "plan-briefly", "plot-style", "retry-network", "sql-safety")
            ]
            assert exported.endswith(f"what: |\n  {FILE_WHAT}\n  Print the path you tried.\n")

            page.get_by_role("link", name="Settings").click()
            expect(page.locator(".use-table")).to_contain_text("CodeInterpreter")
            shot(page, "config")
        finally:
            browser.close()
    assert Experience.objects.get(exp_id="sql-safety").status == "draft"
    assert SelectionLog.objects.filter(selected=["file-validation"]).count() == 1
    # list, create form, edit form, detail (approved, with the r1..r3 diff), review queue, try selection,
    # import report with the download link, settings.
    for name in ("list", "form", "edit", "detail", "review", "try", "import", "config"):
        assert (SCREENSHOTS / f"experiences_{name}.png").stat().st_size > 10_000


def test_what_was_typed_before_the_form_script_ran_is_validated_when_it_runs(live_server, team: str) -> None:
    """A slow page: the field is filled while experience_form.js is still on its way."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = browser.new_page()
            page.goto(live_server.url + "/accounts/login/")
            page.get_by_label("Username").fill("grace")
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Log in").click()
            expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
            held = []
            page.route("**/experience_form.js", lambda route: held.append(route))
            page.goto(live_server.url + "/experiences/new/", wait_until="commit")
            page.get_by_label("exp_id").fill("file validation")
            page.wait_for_timeout(500)  # the validation delay passes with no script listening
            assert len(held) == 1
            expect(page.locator('[data-errors-for="exp_id"]')).to_be_empty()
            held[0].continue_()
            expect(page.locator('[data-errors-for="exp_id"]')).to_contain_text("must be a slug")
        finally:
            browser.close()
