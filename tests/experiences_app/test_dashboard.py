"""Experiences pages of the dashboard: team scoping, the validation endpoint, curator-only actions,
CSRF on every POST, the usage counts, try selection, the import report and the export zip."""

from __future__ import annotations

import io
import json
import re
import zipfile
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from experiences_app import selectors, services
from experiences_app.models import Experience, SelectionLog, TeamExperienceConfig
from experiences_app.yaml_io import ExperienceData, dump_experience_file, read_zip, write_zip
from memory_app.conversations import services as memory_services
from memory_app.tenancy.models import TeamMembership
from tests.conftest import Tenant
from tests.experiences_app.conftest import add_experience

PASSWORD = "correct horse battery"
LIST = reverse("experiences:list")
NEW = reverse("experiences:new")
VALIDATE = reverse("experiences:validate")
REVIEW = reverse("experiences:review")
TRY = reverse("experiences:try")
IMPORT = reverse("experiences:import")
EXPORT = reverse("experiences:export")
CONFIG = reverse("experiences:config")
CONFIG_SAVE = reverse("experiences:config_save")
FILE_WHEN = "Use when user requests file operations or FileNotFoundError occurred."
FILE_WHAT = "Always check os.path.exists() before reading files."


def url(name: str, *args: str) -> str:
    return reverse(f"experiences:{name}", args=args)


def login(tenant: Tenant, username: str, *, curator: bool = False, csrf: bool = False) -> Client:
    user = get_user_model().objects.create_user(username, password=PASSWORD)
    TeamMembership.objects.create(team=tenant.team, user=user, is_admin=curator)
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


@pytest.fixture(autouse=True)
def offline(settings) -> None:
    """The offline backend selects (no LLM server in these tests)."""
    settings.LLM_BACKEND = ""
    settings.LLM_BASE_URL = ""


@pytest.fixture
def member(tenant: Tenant) -> Client:
    return login(tenant, "ada")


@pytest.fixture
def curator(tenant: Tenant) -> Client:
    return login(tenant, "grace", curator=True)


def flashes(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def csrf_token(client: Client, page: str) -> str:
    html = client.get(page).content.decode()
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)


# --- who may see what ------------------------------------------------------------------------------


def test_anonymous_visitors_are_sent_to_log_in(client: Client, tenant: Tenant) -> None:
    add_experience(tenant.team, "file-validation", when=FILE_WHEN, what=FILE_WHAT)
    for target in (LIST, NEW, REVIEW, TRY, IMPORT, EXPORT, CONFIG, url("detail", "file-validation")):
        response = client.get(target)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), target


def test_pages_show_only_the_current_teams_experiences(member: Client, tenant: Tenant, other_tenant: Tenant) -> None:
    add_experience(tenant.team, "ours", when="Use when ours.", what="Ours.")
    add_experience(other_tenant.team, "theirs", when="Use when theirs.", what="Theirs.", status="draft")

    listing = member.get(LIST).content.decode()
    assert "ours" in listing and "theirs" not in listing
    assert "theirs" not in member.get(REVIEW).content.decode()
    for target in (url("detail", "theirs"), url("edit", "theirs")):
        assert member.get(target).status_code == 404
    # The validation endpoint cannot be used to probe another team's experience.
    assert member.post(VALIDATE, {"existing": "theirs", "when": "x", "what": "y"}).status_code == 404
    # Nor does another team's exp_id count as taken.
    answer = member.post(VALIDATE, {"exp_id": "theirs", "when": "x", "what": "y"}).json()
    assert answer["valid"] is True
    with zipfile.ZipFile(io.BytesIO(member.get(EXPORT).content)) as archive:
        assert archive.namelist() == ["handcrafted_exp_ours.yaml"]


def test_a_user_without_a_team_gets_no_experiences(tenant: Tenant) -> None:
    add_experience(tenant.team, "ours", when="Use when ours.", what="Ours.")
    loner = get_user_model().objects.create_user("loner", password=PASSWORD)
    client = Client()
    client.force_login(loner)
    for target in (LIST, EXPORT, TRY):
        assert client.get(target).status_code == 403


# --- list and usage ----------------------------------------------------------------------------------


def test_the_list_filters_by_role_status_and_text(member: Client, tenant: Tenant) -> None:
    add_experience(tenant.team, "file-validation", when=FILE_WHEN, what=FILE_WHAT, who=["CodeInterpreter"])
    add_experience(tenant.team, "plan-briefly", when="Use when planning.", what="Plan briefly.", who=["Planner"])
    add_experience(tenant.team, "everyone", when="Use when anything.", what="Be kind.", status="draft")

    def shown(**query: str) -> list[str]:
        html = member.get(LIST, query).content.decode()
        return re.findall(r'<tr class="exp-row" id="exp-([^"]+)"', html)

    assert shown() == ["everyone", "file-validation", "plan-briefly"]
    assert shown(role="planner") == ["everyone", "plan-briefly"]  # empty `who` targets every role
    assert shown(status="draft") == ["everyone"]
    assert shown(q="FileNotFound") == ["file-validation"]


def test_usage_counts_candidates_and_selections_per_window_in_one_query(
    tenant: Tenant, other_tenant: Tenant, django_assert_num_queries
) -> None:
    now = timezone.now()

    def log(days_ago: int, candidates: list[str], selected: list[str], team=tenant.team) -> None:
        offered = [{"exp_id": c, "when": "w"} for c in candidates]
        row = SelectionLog.objects.create(team=team, role="r", query="q", candidates=offered, selected=selected)
        SelectionLog.objects.filter(pk=row.pk).update(created_at=now - timedelta(days=days_ago))

    log(1, ["a", "b"], ["a"])
    log(3, ["a", "b"], ["b"])
    log(10, ["a"], ["a"])
    log(40, ["a"], ["a"])  # outside both windows
    log(1, ["a"], ["a"], team=other_tenant.team)  # another team's

    with django_assert_num_queries(1):
        usage = selectors.experience_usage(team=tenant.team, exp_ids=["a", "b", "c"], now=now)
    assert usage["a"] == selectors.ExperienceUsage(candidate_7d=2, selected_7d=1, candidate_30d=3, selected_30d=2)
    assert usage["b"] == selectors.ExperienceUsage(candidate_7d=2, selected_7d=1, candidate_30d=2, selected_30d=1)
    assert usage["c"] == selectors.ExperienceUsage()


def test_the_list_shows_usage_counts_with_a_fixed_number_of_queries(
    member: Client, tenant: Tenant, django_assert_max_num_queries
) -> None:
    for n in range(12):
        add_experience(tenant.team, f"exp-{n:02d}", when=f"Use when case {n}.", what="Do it.")
    SelectionLog.objects.create(
        team=tenant.team, role="r", query="q", candidates=[{"exp_id": "exp-03", "when": "w"}], selected=["exp-03"]
    )
    member.get(LIST)  # warm the session and auth caches
    with django_assert_max_num_queries(10):
        html = member.get(LIST).content.decode()
    row = re.search(r'id="exp-exp-03".*?</tr>', html, re.S).group(0)
    assert re.search(r'candidate-counts"[^>]*><span class="usage-7">1</span> · <span class="muted">1</span>', row)
    assert re.search(r'selected-counts"[^>]*><a [^>]*><strong class="usage-7">1</strong>', row)


# --- create, edit and the validation endpoint -------------------------------------------------------


def test_validation_returns_field_errors_from_the_same_rules_as_the_services(member: Client, tenant: Tenant) -> None:
    add_experience(tenant.team, "taken", when="Use when taken.", what="Taken.")
    answer = member.post(VALIDATE, {"exp_id": "bad id!", "who": "Planner\n" + "x" * 101, "when": " ", "what": "ok"})
    assert answer.status_code == 200
    body = answer.json()
    assert body["valid"] is False and body["yaml"] == ""
    assert set(body["errors"]) == {"exp_id", "who", "when"}
    assert "slug" in body["errors"]["exp_id"][0]["message"]
    assert "longer than 100" in body["errors"]["who"][0]["message"]
    assert body["errors"]["when"][0]["message"] == "must not be empty"

    for exp_id, problem in (("taken", "already exists"), ("import", "reserved")):
        body = member.post(VALIDATE, {"exp_id": exp_id, "when": "w", "what": "w"}).json()
        assert problem in body["errors"]["exp_id"][0]["message"]


def test_validation_previews_the_exact_file_an_export_writes(member: Client) -> None:
    body = member.post(
        VALIDATE,
        {"exp_id": "file-validation", "who": "CodeInterpreter\n\n", "when": FILE_WHEN + "  \r\n", "what": FILE_WHAT},
    ).json()
    name, content = dump_experience_file(
        ExperienceData(exp_id="file-validation", who=["CodeInterpreter"], when=FILE_WHEN, what=FILE_WHAT)
    )
    assert body["valid"] is True and body["errors"] == {}
    assert body["file_name"] == name
    assert body["yaml"] == content.decode()
    assert body["yaml"].startswith("exp_id: file-validation\nwho:\n  - CodeInterpreter\nwhen: |\n")


def test_creating_saves_a_draft_revision_and_shows_errors_inline(member: Client, tenant: Tenant) -> None:
    bad = member.post(NEW, {"exp_id": "file validation", "who": "", "when": FILE_WHEN, "what": ""})
    assert bad.status_code == 400
    html = bad.content.decode()
    assert re.search(r'data-errors-for="exp_id"[^>]*><li>must be a slug', html)
    assert re.search(r'data-errors-for="what"[^>]*><li>must not be empty', html)
    assert FILE_WHEN in html  # what was typed stays in the form
    assert not Experience.objects.exists()

    response = member.post(
        NEW, {"exp_id": "file-validation", "who": "CodeInterpreter", "when": FILE_WHEN, "what": FILE_WHAT}
    )
    assert response.status_code == 302 and response["Location"] == url("detail", "file-validation")
    experience = Experience.objects.get(team=tenant.team)
    assert (experience.status, experience.author, experience.revision) == ("draft", "user:ada", 1)
    assert experience.who == ["CodeInterpreter"]

    again = member.post(NEW, {"exp_id": "file-validation", "when": "w", "what": "w"})
    assert again.status_code == 409 and "already exists" in again.content.decode()


def test_editing_an_approved_experience_adds_a_revision_and_returns_it_to_draft(member: Client, tenant: Tenant) -> None:
    experience = add_experience(tenant.team, "file-validation", when=FILE_WHEN, what=FILE_WHAT)
    edit = url("edit", "file-validation")
    assert member.get(edit).status_code == 200

    response = member.post(edit, {"who": "", "when": FILE_WHEN, "what": FILE_WHAT + " Twice.", "note": "stricter"})
    assert response.status_code == 302
    experience.refresh_from_db()
    assert (experience.revision, experience.status) == (2, "draft")
    assert experience.revisions.get(number=2).note == "stricter"

    detail = member.get(url("detail", "file-validation"), {"a": "1", "b": "2"}).content.decode()
    assert FILE_WHAT + "<ins> Twice.</ins>" in detail  # the changed words, inside the changed line
    assert "<del>approved</del>" in detail and "<ins>draft</ins>" in detail

    unchanged = member.post(edit, {"who": "", "when": FILE_WHEN, "what": FILE_WHAT + " Twice."}, follow=True)
    assert "Nothing changed" in flashes(unchanged)[0]
    experience.refresh_from_db()
    assert experience.revision == 2


# --- curator-only actions and CSRF ----------------------------------------------------------------------


def test_only_team_admins_approve_disable_and_change_settings(member: Client, curator: Client, tenant: Tenant) -> None:
    experience = add_experience(tenant.team, "draft-one", when="Use when drafting.", what="Draft.", status="draft")
    for target in (url("approve", "draft-one"), url("disable", "draft-one")):
        assert member.post(target).status_code == 403
    assert member.post(CONFIG_SAVE, {"llm_alias": "offline"}).status_code == 403
    experience.refresh_from_db()
    assert experience.status == "draft" and not TeamExperienceConfig.objects.exists()
    assert "Approve" not in member.get(REVIEW).content.decode()

    assert 'action="' + url("approve", "draft-one") + '"' in curator.get(REVIEW).content.decode()
    response = curator.post(url("approve", "draft-one"), {"next": REVIEW}, follow=True)
    assert response.redirect_chain[-1][0] == REVIEW
    assert "Approved draft-one" in flashes(response)[0]
    experience.refresh_from_db()
    assert (experience.status, experience.reviewer, experience.revision) == ("approved", "user:grace", 2)

    curator.post(url("disable", "draft-one"))
    experience.refresh_from_db()
    assert experience.status == "disabled"
    assert curator.get(url("approve", "draft-one")).status_code == 405  # POST only


def test_every_post_needs_the_csrf_token(tenant: Tenant) -> None:
    add_experience(tenant.team, "draft-one", when="Use when drafting.", what="Draft.", status="draft")
    client = login(tenant, "grace", curator=True, csrf=True)
    posts = {
        NEW: {"exp_id": "new-one", "when": "w", "what": "w"},
        VALIDATE: {"exp_id": "new-one", "when": "w", "what": "w"},
        url("edit", "draft-one"): {"when": "changed", "what": "w"},
        url("approve", "draft-one"): {},
        url("disable", "draft-one"): {},
        TRY: {"role": "Planner", "query": "q"},
        IMPORT: {"files": SimpleUploadedFile("handcrafted_exp_x.yaml", b"exp_id: x\nwhen: w\nwhat: w\n")},
        CONFIG_SAVE: {"llm_alias": "offline"},
    }
    for target, data in posts.items():
        assert client.post(target, data).status_code == 403, target
    assert Experience.objects.get().revision == 1 and not SelectionLog.objects.exists()

    token = csrf_token(client, NEW)
    response = client.post(NEW, {"exp_id": "new-one", "when": "w", "what": "w", "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    answer = client.post(VALIDATE, {"exp_id": "x", "when": "w", "what": "w"}, HTTP_X_CSRFTOKEN=token)
    assert answer.status_code == 200 and answer.json()["valid"] is True


def test_settings_are_saved_through_the_service_with_template_validation(curator: Client, tenant: Tenant) -> None:
    add_experience(tenant.team, "x", when="Use when x.", what="X.", who=["CodeInterpreter"])
    page = curator.get(CONFIG).content.decode()
    roles = re.findall(r'<input type="hidden" name="role" value="([^"]+)">', page)
    assert roles == ["planner", "code_generator"]  # CodeInterpreter is governed by code_generator

    bad = curator.post(
        CONFIG_SAVE,
        {"role": roles, "use": ["off", "on"], "selection_template": "Pick {user_query} {{ {oops}"},
    )
    assert bad.status_code == 400
    assert "unknown placeholder(s) {oops}" in bad.content.decode()
    assert "Pick {user_query} {{ {oops}" in bad.content.decode()  # kept for fixing
    assert not TeamExperienceConfig.objects.exists()

    template = 'Experiences:\n{experiences}\nQuery: {user_query}\nAnswer {{"id": true}}'
    response = curator.post(
        CONFIG_SAVE,
        {
            "role": roles,
            "use": ["off", "on"],
            "new_role": "Reviewer",
            "new_use": "off",
            "selection_template": template,
            "llm_alias": "offline",
        },
    )
    assert response.status_code == 302
    config = TeamExperienceConfig.objects.get(team=tenant.team)
    flags = {"code_generator": True, "planner": False, "Reviewer": False}
    assert config.use_experience == flags
    assert (config.selection_template, config.llm_alias, config.updated_by) == (template, "offline", "user:grace")


def test_the_settings_page_shows_which_role_each_switch_governs(curator: Client, tenant: Tenant) -> None:
    add_experience(tenant.team, "x", when="Use when x.", what="X.", who=["CodeInterpreter", "Reviewer"])
    # The role-name spelling of a switch shows in its switch's row, not as a row of its own.
    services.experience_config_update(team=tenant.team, data={"use_experience": {"CodeInterpreter": False}}, actor="t")
    page = curator.get(CONFIG).content.decode()
    rows = re.findall(
        r'<tr class="switch-row">\s*<th scope="row" class="governs"><span class="setting-label">([^<]+)</span>.*?'
        r'<code class="config-key"[^>]*>([^<]+)</code>.*?'
        r'<option value="on"( selected)?>yes</option><option value="off"( selected)?>no</option>',
        page,
        re.S,
    )
    assert [(switch, role, bool(off)) for role, switch, _, off in rows] == [
        ("planner.use_experience", "Planner", False),
        ("code_generator.use_experience", "CodeInterpreter", True),
        ("Reviewer.use_experience", "Reviewer", False),
    ]

    response = curator.post(CONFIG_SAVE, {"role": ["planner", "code_generator", "Reviewer"], "use": ["on", "on", "on"]})
    assert response.status_code == 302
    # Saving the page writes the switch's own name; the role-name spelling it replaced is gone.
    assert TeamExperienceConfig.objects.get(team=tenant.team).use_experience == {
        "planner": True,
        "code_generator": True,
        "Reviewer": True,
    }
    assert selectors.config_uses_experience(TeamExperienceConfig.objects.get(team=tenant.team), "CodeInterpreter")


# --- try selection -------------------------------------------------------------------------------------


def test_try_selection_runs_the_service_and_shows_prompt_response_and_injected_text(
    member: Client, tenant: Tenant
) -> None:
    add_experience(tenant.team, "file-validation", when=FILE_WHEN, what=FILE_WHAT, who=["CodeInterpreter"])
    add_experience(tenant.team, "plot-style", when="Use when the user asks for a chart or plot.", what="Label axes.")
    session = memory_services.session_create(team=tenant.team, external_id="csv-chat")
    memory_services.message_append(
        session=session, messages=[{"role": "user", "content": "I got FileNotFoundError opening data.csv"}]
    )
    assert "csv-chat" in member.get(TRY).content.decode()

    response = member.post(TRY, {"role": "CodeInterpreter", "query": "read the file again", "session": str(session.pk)})
    assert response.status_code == 200
    log = SelectionLog.objects.get(team=tenant.team)
    assert log.session == session and log.selected == ["file-validation"] and log.backend == "extractive"
    html = response.content.decode()
    result = response.context["result"]
    assert [c["exp_id"] for c in result.candidates] == ["file-validation", "plot-style"]
    assert "FileNotFoundError opening data.csv" in result.context
    for shown in ("Candidates", "Prompt messages", "Raw response", "Parsed result", "Injected text"):
        assert shown in html
    assert '<pre class="json parsed-result">[&quot;file-validation&quot;]</pre>' in html
    injected = re.search(r'<pre class="json injected-text">(.*?)</pre>', html, re.S).group(1)
    assert FILE_WHAT in injected and "Label axes." not in injected
    download = member.get(url("selection_download", str(log.pk)))
    assert download["Content-Disposition"] == 'attachment; filename="codeinterpreter_experience_selection_log_0_0.json"'
    assert json.loads(download.content) == log.messages


def test_try_selection_refuses_another_teams_session_and_both_contexts(
    member: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    theirs = memory_services.session_create(team=other_tenant.team, external_id="theirs")
    mine = memory_services.session_create(team=tenant.team, external_id="mine")
    response = member.post(TRY, {"role": "Planner", "query": "q", "session": str(theirs.pk)})
    assert response.status_code == 400 and "No session of this team" in response.content.decode()
    both = member.post(TRY, {"role": "Planner", "query": "q", "session": str(mine.pk), "context": "text"})
    assert both.status_code == 400 and "not both" in both.content.decode()
    assert not SelectionLog.objects.exists()


def test_try_selection_explains_a_skipped_selection(member: Client, tenant: Tenant) -> None:
    services.experience_config_update(team=tenant.team, data={"use_experience": {"Planner": False}}, actor="t")
    response = member.post(TRY, {"role": "Planner", "query": "plan my trip"})
    assert response.status_code == 200
    assert "Use_experience is false for role &#x27;Planner&#x27;" in response.content.decode()
    assert not SelectionLog.objects.exists()


# --- import and export ---------------------------------------------------------------------------------


def upload(name: str, content: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content)


def test_import_reports_created_updated_unchanged_and_rejected(member: Client, tenant: Tenant) -> None:
    add_experience(tenant.team, "same", when="Use when same.", what="Same.")
    add_experience(tenant.team, "changed", when="Use when changed.", what="Old.")
    files = [
        ("handcrafted_exp_new.yaml", b"exp_id: new-one\nwho:\n  - Planner\nwhen: |\n  Use when new.\nwhat: New.\n"),
        ("handcrafted_exp_legacy.yaml", b"exp_id: legacy\nexperience_text: Check paths first.\n"),
        ("handcrafted_exp_same.yaml", b"exp_id: same\nwhen: Use when same.\nwhat: Same.\n"),
        ("handcrafted_exp_broken.yaml", b"exp_id: broken\nwhen: [unclosed\n"),
    ]
    archive = write_zip([("handcrafted_exp_changed.yaml", b"exp_id: changed\nwhen: Use when changed.\nwhat: New.\n")])

    dry = member.post(
        IMPORT, {"files": [upload(n, c) for n, c in files] + [upload("all.zip", archive)], "dry_run": "on"}
    )
    assert dry.status_code == 200
    report = dry.context["report"]
    assert report["dry_run"] is True
    assert Experience.objects.filter(team=tenant.team).count() == 2  # nothing written
    assert "dry run: nothing was written" in dry.content.decode()

    response = member.post(IMPORT, {"files": [upload(n, c) for n, c in files] + [upload("all.zip", archive)]})
    report = response.context["report"]
    assert [e["exp_id"] for e in report["created"]] == ["new-one", "legacy"]
    assert [e["exp_id"] for e in report["updated"]] == ["changed"]
    assert [e["exp_id"] for e in report["unchanged"]] == ["same"]
    assert [(e["file"], e["line"]) for e in report["rejected"]] == [("handcrafted_exp_broken.yaml", 3)]
    html = response.content.decode()
    assert "handcrafted_exp_broken.yaml" in html and "invalid YAML" in html
    legacy = Experience.objects.get(team=tenant.team, exp_id="legacy")
    assert legacy.when == legacy.what == "Check paths first." and legacy.status == "draft"
    assert Experience.objects.get(team=tenant.team, exp_id="changed").status == "draft"


def test_the_import_page_names_the_approved_experiences_whose_change_awaits_review(
    member: Client, tenant: Tenant
) -> None:
    add_experience(tenant.team, "changed", when="Use when changed.", what="Old.")  # approved
    add_experience(tenant.team, "draft-edit", when="Use when drafting.", what="Old.", status="draft")
    files = [
        upload("handcrafted_exp_changed.yaml", b"exp_id: changed\nwhen: Use when changed.\nwhat: New.\n"),
        upload("handcrafted_exp_draft.yaml", b"exp_id: draft-edit\nwhen: Use when drafting.\nwhat: New.\n"),
    ]
    response = member.post(IMPORT, {"files": files})
    assert response.status_code == 200
    html = response.content.decode()
    notice = re.search(r'<div class="[^"]*awaiting-review[^"]*"[^>]*>(.*?)</div>', html, re.S).group(1)
    assert "changed" in notice and "draft-edit" not in notice
    assert "approved text stays selected until the change is approved" in notice
    updated = re.search(r'<table class="list compact report-table report-updated">(.*?)</table>', html, re.S).group(1)
    assert "approved → draft" in updated and "awaiting review" in updated
    assert "draft → draft" not in updated  # a status that did not change is shown once
    assert Experience.objects.get(team=tenant.team, exp_id="changed").status == "draft"


def test_import_approval_is_for_team_admins_and_a_bad_zip_is_reported(
    member: Client, curator: Client, tenant: Tenant
) -> None:
    content = b"exp_id: x\nwhen: Use when x.\nwhat: X.\n"
    refused = member.post(IMPORT, {"files": [upload("handcrafted_exp_x.yaml", content)], "approve": "on"})
    assert refused.status_code == 403 and not Experience.objects.exists()

    broken = member.post(IMPORT, {"files": [upload("exp.zip", b"not a zip")]})
    assert broken.status_code == 400 and "not a readable zip archive" in broken.content.decode()
    assert member.post(IMPORT, {}).status_code == 400

    curator.post(IMPORT, {"files": [upload("handcrafted_exp_x.yaml", content)], "approve": "on"})
    assert Experience.objects.get(team=tenant.team).status == "approved"


def test_export_downloads_a_zip_that_imports_back_unchanged(member: Client, tenant: Tenant) -> None:
    add_experience(tenant.team, "file-validation", when=FILE_WHEN, what=FILE_WHAT, who=["CodeInterpreter"])
    add_experience(tenant.team, "off", when="Use when off.", what="Off.", status="disabled")
    response = member.get(EXPORT)
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == 'attachment; filename="experiences-alpha.zip"'
    files = read_zip(response.content)
    assert [name for name, _ in files] == ["handcrafted_exp_file-validation.yaml", "handcrafted_exp_off.yaml"]
    assert (
        files[0][1]
        == dump_experience_file(
            ExperienceData(exp_id="file-validation", who=["CodeInterpreter"], when=FILE_WHEN, what=FILE_WHAT)
        )[1]
    )
    approved = read_zip(member.get(EXPORT, {"status": "approved"}).content)
    assert [name for name, _ in approved] == ["handcrafted_exp_file-validation.yaml"]
    assert member.get(EXPORT, {"status": "bogus"}).status_code == 404

    again = member.post(IMPORT, {"files": [upload("back.zip", response.content)]})
    assert [e["exp_id"] for e in again.context["report"]["unchanged"]] == ["file-validation", "off"]
