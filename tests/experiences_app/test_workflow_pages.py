"""The experience workflow pages: trying a draft, role choices and the unknown-role warning, past
selections, the review queue with inline word diffs and reject-with-comment, and the settings labels."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from experiences_app import services
from experiences_app.models import Experience, ExperienceReview, SelectionLog
from memory_app.tenancy.models import TeamMembership
from tests.conftest import Tenant
from tests.experiences_app.conftest import add_experience

PASSWORD = "correct horse battery"
WHEN = "Use when user requests file operations or FileNotFoundError occurred."
WHAT = "Always check os.path.exists() before reading files."


def url(name: str, *args: str) -> str:
    return reverse(f"experiences:{name}", args=args)


def login(tenant: Tenant, username: str, *, curator: bool = False) -> Client:
    user = get_user_model().objects.create_user(username, password=PASSWORD)
    TeamMembership.objects.create(team=tenant.team, user=user, is_admin=curator)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture(autouse=True)
def offline(settings) -> None:
    settings.LLM_BACKEND = ""
    settings.LLM_BASE_URL = ""


@pytest.fixture
def member(tenant: Tenant) -> Client:
    return login(tenant, "ada")


@pytest.fixture
def curator(tenant: Tenant) -> Client:
    return login(tenant, "grace", curator=True)


def text(response) -> str:
    return response.content.decode()


# --- try a draft ---------------------------------------------------------------------------------


def test_trying_a_draft_offers_it_marks_the_page_as_a_trial_and_logs_nothing(member: Client, tenant: Tenant):
    add_experience(tenant.team, "fresh", when=WHEN, what=WHAT, who=["CodeInterpreter"], status="draft")
    detail = text(member.get(url("detail", "fresh")))
    assert f'href="{url("try")}?draft=fresh"' in detail

    form = member.get(url("try"), {"draft": "fresh"})
    page = text(form)
    assert "Trial of" in page and 'value="CodeInterpreter"' in page  # the draft's role is filled in
    assert re.search(r'<option value="fresh" selected>', page)

    trial = {"draft": "fresh", "role": "CodeInterpreter", "query": "read data.csv", "context": WHEN}
    run = member.post(url("try"), trial)
    assert run.status_code == 200
    page = text(run)
    assert "Trial result" in page and "trial · not logged" in page and "draft on trial" in page
    assert "Download prompt log" not in page
    assert not SelectionLog.objects.exists()


def test_a_real_selection_from_the_try_page_is_logged(member: Client, tenant: Tenant):
    add_experience(tenant.team, "file-validation", when=WHEN, what=WHAT)
    run = member.post(url("try"), {"role": "CodeInterpreter", "query": "read data.csv", "context": WHEN})
    assert run.status_code == 200 and SelectionLog.objects.count() == 1
    assert "Trial" not in text(run)


def test_trying_another_teams_draft_is_refused(member: Client, tenant: Tenant, other_tenant: Tenant):
    add_experience(other_tenant.team, "secret", when=WHEN, what=WHAT, status="draft")
    refused = member.post(url("try"), {"draft": "secret", "role": "x", "query": "q"})
    assert refused.status_code == 400 and "No experience of this team" in text(refused)
    assert "Trial of" not in text(member.get(url("try"), {"draft": "secret"}))


# --- roles are choices ---------------------------------------------------------------------------


def test_the_form_offers_the_teams_roles_as_boxes_and_warns_about_an_unknown_role(member: Client, tenant: Tenant):
    add_experience(tenant.team, "plan", when=WHEN, what=WHAT, who=["Planner"])
    SelectionLog.objects.create(team=tenant.team, role="Reviewer", query="q")
    page = text(member.get(url("new")))
    boxes = re.findall(r'<input type="checkbox" name="who" value="([^"]+)"', page)
    assert {"Planner", "Reviewer", "CodeInterpreter"} <= set(boxes)

    answer = member.post(
        url("validate"), {"exp_id": "x", "who": ["Planner"], "who_other": "Plannr", "when": WHEN, "what": WHAT}
    ).json()
    assert answer["valid"] is True  # a warning, not an error
    (warning,) = answer["warnings"]["who"]
    assert "No agent has the role 'Plannr' yet" in warning["message"] and "'Planner'" in warning["message"]


def test_saving_with_ticked_and_typed_roles_stores_both_and_the_page_keeps_warning(member: Client, tenant: Tenant):
    add_experience(tenant.team, "plan", when=WHEN, what=WHAT, who=["Planner"])
    saved = member.post(
        url("new"), {"exp_id": "typo", "who": ["Planner"], "who_other": "Plannr, planner", "when": WHEN, "what": WHAT}
    )
    assert saved.status_code == 302
    assert Experience.objects.get(exp_id="typo").who == ["Planner", "Plannr"]  # each role once
    detail = text(member.get(url("detail", "typo")))
    assert "No agent has the role &#x27;Plannr&#x27; yet" in detail

    edit = text(member.get(url("edit", "typo")))
    assert re.search(r'value="Planner" checked', edit) and 'value="Plannr"' in edit  # typed text kept


# --- past selections -----------------------------------------------------------------------------


def log(tenant: Tenant, role: str, selected: list[str], *, days_ago: int = 0, query: str = "q") -> SelectionLog:
    row = SelectionLog.objects.create(
        team=tenant.team,
        role=role,
        query=query,
        candidates=[{"exp_id": e, "when": "w"} for e in ["plot-style", "file-validation"]],
        selected=selected,
        raw_response='{"plot-style": %s}' % ("true" if "plot-style" in selected else "false"),
    )
    SelectionLog.objects.filter(pk=row.pk).update(created_at=timezone.now() - timedelta(days=days_ago))
    return row


def rows(response) -> list[str]:
    return re.findall(r'<tr class="selection-row" id="selection-([^"]+)"', text(response))


def test_past_selections_filter_by_role_picked_experience_and_date(member: Client, tenant: Tenant):
    old = log(tenant, "Planner", ["plot-style"], days_ago=10)
    planner = log(tenant, "Planner", ["file-validation"])
    coder = log(tenant, "CodeInterpreter", ["plot-style", "file-validation"])
    page = member.get(url("selections"))
    assert rows(page) == [str(coder.pk), str(planner.pk), str(old.pk)]
    assert "2 of 2" in text(page) and 'href="/experiences/e/plot-style/"' in text(page)

    assert rows(member.get(url("selections"), {"role": "Planner"})) == [str(planner.pk), str(old.pk)]
    assert rows(member.get(url("selections"), {"picked": "plot-style"})) == [str(coder.pk), str(old.pk)]
    since = (timezone.localdate() - timedelta(days=2)).isoformat()
    assert rows(member.get(url("selections"), {"since": since})) == [str(coder.pk), str(planner.pk)]
    until = (timezone.localdate() - timedelta(days=5)).isoformat()
    assert rows(member.get(url("selections"), {"until": until})) == [str(old.pk)]
    bad = member.get(url("selections"), {"since": "yesterday"})
    assert bad.status_code == 200 and 'aria-invalid="true"' in text(bad)


def test_past_selections_paginate_on_the_server(member: Client, tenant: Tenant):
    for n in range(55):
        log(tenant, "Planner", [], query=f"query {n}")
    first, second = member.get(url("selections")), member.get(url("selections"), {"page": 2, "role": "Planner"})
    assert len(rows(first)) == 50 and len(rows(second)) == 5
    assert "Page 2 of 2" in text(second) and "role=Planner" in text(second)


def test_an_experience_links_to_the_selections_that_picked_it(member: Client, tenant: Tenant):
    add_experience(tenant.team, "plot-style", when="Use when plotting.", what="Label axes.")
    picked = log(tenant, "Planner", ["plot-style"])
    detail = text(member.get(url("detail", "plot-style")))
    link = f"{url('selections')}?picked=plot-style"
    assert f'href="{link}"' in detail
    assert rows(member.get(link)) == [str(picked.pk)]


def test_one_selection_shows_offered_picked_and_why_and_is_team_scoped(
    member: Client, tenant: Tenant, other_tenant: Tenant
):
    add_experience(tenant.team, "plot-style", when="Use when plotting.", what="Label axes.")
    picked = log(tenant, "Planner", ["plot-style"])
    page = text(member.get(url("selection", str(picked.pk))))
    assert '<span class="pill live-pill">picked</span>' in page and "{&quot;plot-style&quot;: true}" in page
    assert "deleted" in page  # file-validation was offered but no longer exists
    SelectionLog.objects.filter(pk=picked.pk).update(
        not_offered=[{"exp_id": "plot-style", "reason": "for Coder, not Planner"}]
    )
    page = text(member.get(url("selection", str(picked.pk))))
    assert "Not offered to the LLM: 1 experience" in page and "for Coder, not Planner" in page
    foreign = SelectionLog.objects.create(team=other_tenant.team, role="x", query="secret")
    assert member.get(url("selection", str(foreign.pk))).status_code == 404
    assert str(foreign.pk) not in text(member.get(url("selections")))


# --- review queue --------------------------------------------------------------------------------


def test_the_review_queue_shows_an_edit_as_a_word_diff_against_the_approved_revision(curator: Client, tenant: Tenant):
    experience = add_experience(tenant.team, "file-validation", when=WHEN, what=WHAT)
    services.experience_update(experience=experience, data={"what": WHAT.replace("check", "verify")}, actor="user:ada")
    add_experience(tenant.team, "fresh", when="Use when new.", what="New.", status="draft")
    page = text(curator.get(url("review")))
    card = re.search(r'<article class="card review-card" id="review-file-validation".*?</article>', page, re.S).group(0)
    assert "<del>check</del>" in card and "<ins>verify</ins>" in card
    assert "r1 still selected" in card
    fresh = re.search(r'<article class="card review-card" id="review-fresh".*?</article>', page, re.S).group(0)
    assert "Never approved" in fresh and "Reject with comment" in fresh


def test_reject_with_a_comment_shows_it_to_the_author_and_empties_the_queue(
    member: Client, curator: Client, tenant: Tenant
):
    add_experience(tenant.team, "fresh", when=WHEN, what=WHAT, status="draft")
    refused = member.post(url("reject", "fresh"), {"comment": "no"})
    assert refused.status_code in (302, 403) and not ExperienceReview.objects.exists()  # admins only

    empty = curator.post(url("reject", "fresh"), {"comment": " ", "next": url("review")}, follow=True)
    assert "Not rejected" in text(empty) and not ExperienceReview.objects.exists()

    done = curator.post(url("reject", "fresh"), {"comment": "Name the paths to check.", "next": url("review")})
    assert done.status_code == 302 and done["Location"] == url("review")
    assert "review-fresh" not in text(curator.get(url("review")))

    author_view = text(member.get(url("detail", "fresh")))
    assert "Revision r1 was rejected by user:grace" in author_view and "Name the paths to check." in author_view


def test_the_list_says_which_revision_still_serves_an_edited_experience(member: Client, tenant: Tenant):
    experience = add_experience(tenant.team, "file-validation", when=WHEN, what=WHAT)
    services.experience_update(experience=experience, data={"what": "Changed."}, actor="user:ada")
    listing = member.get(url("list")).content.decode()
    # Approved and still served with its approved text: never labelled a draft.
    row = listing[listing.index('id="exp-file-validation"') :]
    row = row[: row.index("</tr>")]
    assert '<span class="status-pill exp-status status-approved"' in row and ">Approved r1 serving</span>" in row
    assert ">r2 awaiting review</span>" in row and "status-pill exp-status status-draft" not in row
    detail = text(member.get(url("detail", "file-validation")))
    assert "Edit awaiting review." in detail and "Selection still uses approved revision" in detail


def test_the_compare_view_marks_changed_words_in_the_line(member: Client, tenant: Tenant):
    experience = add_experience(tenant.team, "x", when=WHEN, what="Label both axes.")
    services.experience_update(experience=experience, data={"what": "Label every axis."}, actor="user:ada")
    page = text(member.get(url("detail", "x"), {"a": 1, "b": 2}))
    diff = re.search(r'<div class="exp-diff".*?<div class="table-scroll"', page, re.S).group(0)
    assert "<del>both axes</del>" in diff and "<ins>every axis</ins>" in diff


# --- settings ------------------------------------------------------------------------------------


def test_settings_show_human_labels_with_the_config_key_as_secondary_text(member: Client, tenant: Tenant):
    page = text(member.get(url("config")))
    assert '<label for="id_llm_alias">Model used for selection</label>' in page
    assert '<code class="config-key">experience.llm_alias</code>' in page
    assert '<span class="setting-label">CodeInterpreter</span>' in page
    assert "code_generator.use_experience</code>" in page
    assert not re.search(r"<label[^>]*>\s*<code>", page)  # no label is a bare configuration key
