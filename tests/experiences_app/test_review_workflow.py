"""The review workflow through the services: an approved experience stays selected while its edit
awaits review, reject with a comment, the review queue, and trials that log nothing."""

from __future__ import annotations

import pytest

from experiences_app import selectors, services
from experiences_app.models import Experience, ExperienceReview, SelectionLog
from memsite.errors import Conflict, InvalidInput
from tests.conftest import Tenant
from tests.experiences_app.conftest import add_experience

WHEN = "Use when user requests file operations or FileNotFoundError occurred."
WHAT = "Always check os.path.exists() before reading files."


@pytest.fixture(autouse=True)
def offline(settings) -> None:
    settings.LLM_BACKEND = ""
    settings.LLM_BASE_URL = ""


def select(tenant: Tenant, role: str = "CodeInterpreter", **kwargs):
    return services.experience_select(team=tenant.team, role=role, query="read data.csv", context=WHEN, **kwargs)


def edit(experience: Experience, **data) -> Experience:
    return services.experience_update(experience=experience, data=data, actor="user:ada")


def test_an_edited_approved_experience_is_still_selected_with_its_approved_text(tenant: Tenant):
    experience = add_experience(tenant.team, "file-validation", when=WHEN, what=WHAT, who=["CodeInterpreter"])
    edited = edit(experience, what=WHAT + " Print the path you tried.", who=["Planner"])
    assert (edited.status, edited.revision) == ("draft", 2)

    result = select(tenant)
    assert [s["exp_id"] for s in result.selected] == ["file-validation"]
    assert result.prompt_text.count(WHAT) == 1 and "Print the path" not in result.prompt_text
    assert result.pending == ["file-validation"]
    # The served revision's roles count, not the pending edit's.
    assert selectors.experience_candidates(team=tenant.team, role="Planner") == []


def test_approving_the_edit_serves_the_new_text(tenant: Tenant):
    experience = add_experience(tenant.team, "file-validation", when=WHEN, what=WHAT)
    edited = edit(experience, what=WHAT + " Print the path you tried.")
    services.experience_approve(experience=edited, actor="user:grace")
    result = select(tenant)
    assert "Print the path you tried." in result.prompt_text and result.pending == []
    experience.refresh_from_db()
    assert experience.serving_revision.number == 3


def test_disabling_or_withdrawing_by_name_takes_it_out_of_selection(tenant: Tenant):
    one = add_experience(tenant.team, "one", when=WHEN, what=WHAT)
    two = add_experience(tenant.team, "two", when=WHEN, what="Another.")
    services.experience_disable(experience=edit(one, what="Changed."), actor="user:grace")
    services.experience_update(experience=two, data={"status": "draft"}, actor="user:grace")
    assert selectors.experience_candidates(team=tenant.team, role="x") == []


def test_a_new_draft_is_never_selected(tenant: Tenant):
    add_experience(tenant.team, "fresh", when=WHEN, what=WHAT, status="draft")
    assert select(tenant).selected == []


def test_reject_keeps_the_text_stores_the_comment_and_leaves_the_queue(tenant: Tenant):
    draft = add_experience(tenant.team, "fresh", when=WHEN, what=WHAT, status="draft")
    assert list(selectors.review_queue(team=tenant.team)) == [draft]

    review = services.experience_reject(experience=draft, actor="user:grace", comment="Say which paths.")
    assert (review.decision, review.revision, review.comment) == ("rejected", 1, "Say which paths.")
    assert list(selectors.review_queue(team=tenant.team)) == []
    assert selectors.rejected_drafts_count(team=tenant.team) == 1
    draft.refresh_from_db()
    assert (draft.status, draft.what) == ("draft", WHAT)

    # Editing it makes a new revision, which is back in the queue.
    edit(draft, what=WHAT + " Name the path.")
    assert [e.exp_id for e in selectors.review_queue(team=tenant.team)] == ["fresh"]


def test_reject_needs_a_comment_and_a_draft(tenant: Tenant):
    approved = add_experience(tenant.team, "ok", when=WHEN, what=WHAT)
    draft = add_experience(tenant.team, "fresh", when=WHEN, what=WHAT, status="draft")
    with pytest.raises(InvalidInput):
        services.experience_reject(experience=draft, actor="user:grace", comment="  ")
    with pytest.raises(Conflict):
        services.experience_reject(experience=approved, actor="user:grace", comment="No.")
    services.experience_reject(experience=draft, actor="user:grace", comment="No.")
    with pytest.raises(Conflict):
        services.experience_reject(experience=draft, actor="user:grace", comment="Again.")


def test_a_rejected_edit_of_an_approved_experience_keeps_the_approved_text_selected(tenant: Tenant):
    experience = add_experience(tenant.team, "file-validation", when=WHEN, what=WHAT)
    edited = edit(experience, what="Never check anything.")
    services.experience_reject(experience=edited, actor="user:grace", comment="That is wrong.")
    assert WHAT in select(tenant, role="anyone").prompt_text


def test_approvals_are_recorded_as_reviews(tenant: Tenant):
    draft = add_experience(tenant.team, "fresh", when=WHEN, what=WHAT, status="draft")
    services.experience_approve(experience=draft, actor="user:grace", note="Looks right.")
    review = ExperienceReview.objects.get(experience=draft)
    assert (review.decision, review.revision, review.reviewer, review.comment) == (
        "approved",
        2,
        "user:grace",
        "Looks right.",
    )


def test_the_review_diff_compares_the_pending_text_with_the_approved_revision(tenant: Tenant):
    experience = add_experience(tenant.team, "file-validation", when=WHEN, what=WHAT)
    edit(experience, what=WHAT.replace("check", "verify"))
    draft = selectors.review_queue(team=tenant.team).get()
    base = selectors.approved_bases(experiences=[draft])[draft.pk]
    assert base.number == 1
    (field,) = selectors.content_word_diff(base, draft)
    assert field.field == "what"
    assert [[s.text for s in row.segments if s.changed] for row in field.rows] == [["check"], ["verify"]]


def test_a_trial_offers_the_draft_and_logs_nothing(tenant: Tenant):
    add_experience(tenant.team, "approved-one", when="Use when plotting a chart.", what="Label axes.")
    draft = add_experience(tenant.team, "fresh", when=WHEN, what=WHAT, status="draft")
    result = select(tenant, trial=draft)
    assert result.trial_exp_id == "fresh" and result.log_id is None
    assert [c["exp_id"] for c in result.candidates] == ["approved-one", "fresh"]
    assert [s["exp_id"] for s in result.selected] == ["fresh"]
    assert not SelectionLog.objects.exists()
    assert "fresh" not in selectors.experience_usage(team=tenant.team)  # counted nowhere
    # The real selection still ignores the draft, and is logged.
    real = select(tenant)
    assert real.selected == [] and SelectionLog.objects.count() == 1


def test_a_trial_of_an_edit_offers_the_pending_text_instead_of_the_approved_one(tenant: Tenant):
    experience = add_experience(tenant.team, "file-validation", when=WHEN, what=WHAT)
    edited = edit(experience, what="Print the path you tried.")
    result = select(tenant, role="anyone", trial=edited)
    assert [c["exp_id"] for c in result.candidates] == ["file-validation"]
    assert "Print the path you tried." in result.prompt_text and WHAT not in result.prompt_text


def test_unknown_roles_are_named_with_the_closest_known_one(tenant: Tenant):
    add_experience(tenant.team, "plan", when=WHEN, what=WHAT, who=["Planner"])
    known = selectors.known_roles(team=tenant.team)
    assert {"Planner", "CodeInterpreter"} <= {role.name for role in known}  # an experience's, the settings'
    assert selectors.unknown_roles(who=["planner", "Plannr", "Zebra"], known=known) == {
        "Plannr": "Planner",
        "Zebra": "",
    }
    (warning, _) = selectors.unknown_role_warnings(who=["Plannr", "Zebra"], known=known)
    assert "No agent has the role 'Plannr' yet" in warning and "Did you mean 'Planner'?" in warning


def test_agent_names_of_sessions_and_selections_are_known_roles(tenant: Tenant):
    from memory_app.conversations import services as memory_services

    session = memory_services.session_create(team=tenant.team, external_id="chat")
    memory_services.message_append(
        session=session, messages=[{"role": "assistant", "content": "hi", "send_from": "DataAnalyst"}]
    )
    SelectionLog.objects.create(team=tenant.team, role="Reviewer", query="q")
    names = {role.name: role.sources for role in selectors.known_roles(team=tenant.team)}
    assert names["DataAnalyst"] == ("sessions",) and names["Reviewer"] == ("selections",)
