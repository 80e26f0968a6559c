"""The experience workflow in chromium at phone (390 px) and desktop (1280 px) width: every
experiences page fits and passes axe; trying a draft; role choices with the unknown-role warning;
past selections; the review queue's word diff and reject-with-comment seen by the author; the
revision compare form clear of the revisions table; the settings labels.

Screenshots: var/screenshots/experiences-<page>-<width>.png.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from playwright.sync_api import Page, expect

from experiences_app import services
from experiences_app.models import ExperienceReview, SelectionLog
from memory_app.conversations import services as memory_services
from tests.browser_kit import DESKTOP, PHONE, WIDTHS, browser, check_page, member, open_page
from tests.experiences_app.conftest import add_experience

pytestmark = pytest.mark.browser

WHEN = "Use when user requests file operations or FileNotFoundError occurred."
WHAT = "Always check os.path.exists() before reading files; print the absolute path you tried when it is missing."
LONG_QUERY = "Read /srv/data/exports/2024/monthly_totals_by_region_and_product_category.csv and plot it " * 3


@dataclass
class World:
    selection_id: str
    session_id: str


@pytest.fixture
def world(transactional_db, settings) -> World:
    """Team "demo": ada (admin), lin (author, not an admin); an approved experience with an edit
    awaiting review, a new draft, a rejected draft, an agent session and past selections."""
    settings.LLM_BACKEND = ""
    settings.LLM_BASE_URL = ""  # the offline backend selects
    team, _ = member("demo", "ada")
    member("demo", "lin", admin=False)
    edited = add_experience(team, "file-validation", when=WHEN, what=WHAT, who=["CodeInterpreter"])
    services.experience_update(
        experience=edited,
        data={"what": WHAT.replace("check", "verify"), "who": ["CodeInterpreter", "Planner"]},
        actor="user:lin",
        note="stricter wording",
    )
    add_experience(team, "plot-style", when="Use when the user asks for a chart or plot of data.", what="Label axes.")
    fresh = add_experience(
        team,
        "retry-network",
        when="Use when a request to a server times out.",
        what="Retry with backoff.",
        who=["CodeInterpreter"],
        status="draft",
    )
    fresh.author = "user:lin"
    fresh.save(update_fields=["author"])
    session = memory_services.session_create(team=team, external_id="csv-chat-with-a-rather-long-external-identifier")
    memory_services.message_append(
        session=session,
        messages=[{"role": "assistant", "content": "data.csv is missing.", "send_from": "CodeInterpreter"}],
    )
    logs = [
        SelectionLog.objects.create(
            team=team,
            role=role,
            query=LONG_QUERY if n == 0 else f"query {n}",
            session=session,
            candidates=[{"exp_id": "file-validation", "when": WHEN}, {"exp_id": "plot-style", "when": "w"}],
            selected=picked,
            raw_response='{"file-validation": true, "plot-style": false, "reason-for-this-answer-is-very-long": true}',
            backend="extractive",
            latency_ms=12,
            prompt_tokens=140,
            completion_tokens=6,
            not_offered=[
                {"exp_id": "retry-network", "reason": "draft r1: never approved"},
                {"exp_id": "planner-steps-with-a-long-identifier", "reason": f"for Planner, not {role}"},
            ],
        )
        for n, (role, picked) in enumerate(
            [("CodeInterpreter", ["file-validation"]), ("Planner", ["plot-style"]), ("CodeInterpreter", [])]
        )
    ]
    return World(selection_id=str(logs[0].pk), session_id=str(session.pk))


PAGES = {
    "list": "/experiences/",
    "new": "/experiences/new/",
    "edit": "/experiences/e/file-validation/edit/",
    "detail": "/experiences/e/file-validation/?a=1&b=2",
    "draft": "/experiences/e/retry-network/",
    "review": "/experiences/review/",
    "try": "/experiences/try/?draft=retry-network",
    "selections": "/experiences/selections/",
    "import": "/experiences/import/",
    "config": "/experiences/settings/",
}


def test_every_experiences_page_fits_and_passes_axe_at_phone_and_desktop(live_server, world: World) -> None:
    pages = {**PAGES, "selection": f"/experiences/selections/{world.selection_id}/"}
    with browser() as opened:
        for viewport in WIDTHS:
            page = open_page(opened, live_server.url, viewport=viewport)
            for name, path in pages.items():
                page.goto(live_server.url + path)
                if name == "selection":  # what the selection left out, and why
                    expect(page.locator("#not-offered li")).to_have_count(2)
                    expect(page.locator("#not-offered")).to_contain_text("draft r1: never approved")
                check_page(page, f"experiences-{name}")


def run_trial(page: Page) -> None:
    page.get_by_role("link", name="Try this draft").click()
    expect(page.get_by_role("status").filter(has_text="Trial of")).to_be_visible()
    expect(page.get_by_label("Role", exact=True)).to_have_value("CodeInterpreter")
    page.get_by_label("Query").fill("the request to the server timed out again")
    page.get_by_role("button", name="Run trial").click()
    # The result is brought into view: on a phone it sits below the form, a screen further down.
    expect(page.get_by_role("heading", name="Trial result")).to_be_in_viewport()
    expect(page.locator("tr.trial-candidate")).to_contain_text("draft on trial")
    expect(page.get_by_text("trial · not logged")).to_be_visible()

    expect(page.get_by_role("link", name="Download prompt log")).to_have_count(0)


@pytest.mark.parametrize("viewport", WIDTHS, ids=lambda v: str(v["width"]))
def test_a_draft_is_tried_before_approval_and_nothing_is_logged(live_server, world: World, viewport) -> None:
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=viewport)
        page.goto(live_server.url + "/experiences/e/retry-network/")
        run_trial(page)
        check_page(page, "experiences-trial-result")
    assert SelectionLog.objects.count() == 3  # the fixture's, none added


@pytest.mark.parametrize("viewport", WIDTHS, ids=lambda v: str(v["width"]))
def test_roles_are_ticked_from_the_teams_roles_and_an_unknown_one_is_flagged(live_server, world: World, viewport):
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=viewport)
        page.goto(live_server.url + "/experiences/new/")
        for role in ("CodeInterpreter", "Planner"):
            expect(page.get_by_role("checkbox", name=role, exact=True)).to_be_visible()
        page.get_by_label("exp_id").fill("path-hints")
        page.get_by_role("checkbox", name="CodeInterpreter", exact=True).check()
        page.get_by_label("Other roles").fill("Plannr")
        page.locator("#id_when").fill(WHEN)
        page.get_by_label("what").fill("Print the path.")
        warning = page.locator('[data-warnings-for="who"]')
        expect(warning).to_contain_text("No agent has the role 'Plannr' yet")
        expect(warning).to_contain_text("Did you mean 'Planner'?")
        expect(page.locator("#exp-validity")).to_have_text("✓ valid")  # a warning, not an error
        expect(page.locator("#id_when")).not_to_have_attribute("aria-invalid", "true")
        check_page(page, "experiences-role-warning")
        page.get_by_label("Other roles").fill("Planner")
        expect(warning).to_be_empty()


@pytest.mark.parametrize("viewport", WIDTHS, ids=lambda v: str(v["width"]))
def test_past_selections_are_listed_filtered_and_linked(live_server, world: World, viewport) -> None:
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=viewport)
        page.goto(live_server.url + "/experiences/e/file-validation/")
        page.get_by_role("link", name="Selections that picked it").click()
        expect(page.locator("tr.selection-row")).to_have_count(1)
        expect(page.get_by_label("Picked experience")).to_have_value("file-validation")
        page.get_by_role("link", name="Clear").click()
        expect(page.locator("tr.selection-row")).to_have_count(3)
        page.get_by_label("Role").select_option("Planner")
        page.get_by_role("button", name="Filter").click()
        expect(page.locator("tr.selection-row")).to_have_count(1)
        expect(page.locator("tr.selection-row .picked-cell")).to_contain_text("plot-style")
        check_page(page, "experiences-selections-filtered")


def test_review_shows_a_word_diff_and_a_rejection_reaches_the_author(live_server, world: World) -> None:
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=PHONE)
        page.goto(live_server.url + "/experiences/review/")
        card = page.locator("#review-file-validation")
        expect(card.locator("del")).to_contain_text(["check"])
        expect(card.locator("ins")).to_contain_text(["Planner", "verify"])
        expect(card).to_contain_text("r1 still selected")
        expect(card.locator(".exp-status")).to_have_text("Approved r1 serving")
        expect(card.locator(".exp-pending")).to_have_text("r2 awaiting review")
        draft = page.locator("#review-retry-network")
        draft.get_by_text("Reject…").click()
        draft.get_by_label("Comment for the author").fill("Say how many retries and how long to wait.")
        check_page(page, "experiences-review-rejecting")
        draft.get_by_role("button", name="Reject with comment").click()
        expect(page.locator(".flash")).to_contain_text("Rejected revision 1 of retry-network")
        expect(page.locator("#review-retry-network")).to_have_count(0)

        author = open_page(opened, live_server.url, viewport=DESKTOP, user="lin")
        author.goto(live_server.url + "/experiences/e/retry-network/")
        note = author.get_by_role("note")
        expect(note).to_contain_text("Revision r1 was rejected by user:ada")
        expect(note).to_contain_text("Say how many retries and how long to wait.")
        expect(author.get_by_role("button", name="Reject with comment")).to_have_count(0)  # not an admin
        check_page(author, "experiences-rejected-for-author")
    review = ExperienceReview.objects.get(decision="rejected")
    assert (review.comment, review.reviewer) == ("Say how many retries and how long to wait.", "user:ada")


def overlap(a: dict, b: dict) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


@pytest.mark.parametrize("viewport", WIDTHS, ids=lambda v: str(v["width"]))
def test_the_compare_form_never_overlaps_the_revisions_table(live_server, world: World, viewport) -> None:
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=viewport)
        page.goto(live_server.url + "/experiences/e/file-validation/?a=1&b=2")
        form = page.locator("form.diff-form").bounding_box()
        table = page.locator("table.revisions").bounding_box()
        diff = page.locator("#exp-diff").bounding_box()
        assert form and table and diff
        assert not overlap(form, table) and not overlap(diff, table) and not overlap(form, diff)
        page.get_by_label("From", exact=True).select_option("2")
        page.get_by_label("To", exact=True).select_option("1")
        page.get_by_role("button", name="Compare").click()
        expect(page.locator("#exp-diff ins", has_text="check")).to_have_count(1)
        check_page(page, "experiences-compare")


@pytest.mark.parametrize("viewport", WIDTHS, ids=lambda v: str(v["width"]))
def test_settings_label_each_setting_in_words_with_its_key_second(live_server, world: World, viewport) -> None:
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=viewport)
        page.goto(live_server.url + "/experiences/settings/")
        expect(page.get_by_label("Model used for selection")).to_be_visible()
        expect(page.get_by_label("Use experiences for CodeInterpreter")).to_be_visible()
        expect(page.get_by_role("textbox", name="Selection prompt")).to_be_visible()
        expect(page.locator("label", has_text="experience.llm_alias")).to_have_count(0)
        expect(page.locator(".config-key", has_text="experience.llm_alias")).to_be_visible()
        check_page(page, "experiences-settings")
