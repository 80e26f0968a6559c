"""The experiences API: CRUD, review, revisions and diffs, settings, the selection log."""

from __future__ import annotations

import json

import pytest

from experiences_app.models import Experience, SelectionLog, TeamExperienceConfig
from tests.experiences_app.conftest import add_experience

pytestmark = pytest.mark.django_db

NEW = {"exp_id": "file-validation", "who": ["CodeInterpreter"], "when": "Use when files are read.\n", "what": "Check."}


def test_it_creates_a_draft_with_its_first_revision(api):
    response = api.post("/api/v1/experiences/", NEW, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["status"], body["revision"], body["author"]) == ("draft", 1, "key:alpha-key")
    assert body["when"] == "Use when files are read."  # cleaned as the file format stores it
    revisions = api.get("/api/v1/experiences/file-validation/revisions/").json()
    assert [(r["number"], r["status"], r["changed_by"]) for r in revisions] == [(1, "draft", "key:alpha-key")]


def test_it_refuses_bad_fields_duplicates_and_reserved_ids(api):
    bad = api.post("/api/v1/experiences/", {**NEW, "exp_id": "has space", "when": "  "}, format="json")
    assert bad.status_code == 400
    assert set(bad.json()["fields"]) == {"exp_id", "when"}
    api.post("/api/v1/experiences/", NEW, format="json")
    assert api.post("/api/v1/experiences/", NEW, format="json").status_code == 409
    reserved = api.post("/api/v1/experiences/", {**NEW, "exp_id": "import"}, format="json")
    assert reserved.status_code == 400 and "reserved" in reserved.json()["detail"]


def test_list_filters_by_role_status_and_text(api, tenant):
    add_experience(tenant.team, "a-all", when="Use when plotting.", what="w")
    add_experience(tenant.team, "b-planner", when="Use when planning.", what="w", who=["Planner"])
    add_experience(tenant.team, "c-coder", when="Use when coding.", what="w", who=["Coder"], status="draft")

    def ids(**params):
        return [e["exp_id"] for e in api.get("/api/v1/experiences/", params).json()["results"]]

    assert ids() == ["a-all", "b-planner", "c-coder"]
    assert ids(role="planner") == ["a-all", "b-planner"]
    assert ids(status="draft") == ["c-coder"]
    assert ids(q="PLANNING") == ["b-planner"]
    assert api.get("/api/v1/experiences/", {"status": "nope"}).status_code == 400


def test_approval_needs_an_admin_key_and_editing_returns_to_draft(api, admin_api):
    api.post("/api/v1/experiences/", NEW, format="json")
    refused = api.post("/api/v1/experiences/file-validation/approve/")
    assert refused.status_code == 403
    approved = admin_api.post("/api/v1/experiences/file-validation/approve/", {"note": "looks right"}, format="json")
    assert approved.json()["status"] == "approved" and approved.json()["reviewer"] == "key:alpha-admin"

    edited = api.patch("/api/v1/experiences/file-validation/", {"what": "Check twice."}, format="json")
    assert (edited.json()["status"], edited.json()["reviewer"], edited.json()["revision"]) == ("draft", "", 3)
    assert api.patch("/api/v1/experiences/file-validation/", {"status": "approved"}, format="json").status_code == 403
    unchanged = api.patch("/api/v1/experiences/file-validation/", {"what": "Check twice."}, format="json")
    assert unchanged.json()["revision"] == 3  # no change, no revision

    revisions = api.get("/api/v1/experiences/file-validation/revisions/").json()
    assert [(r["number"], r["status"], r["note"]) for r in revisions] == [
        (3, "draft", "edited"),
        (2, "approved", "looks right"),
        (1, "draft", "created"),
    ]


def test_diff_gives_a_unified_diff_per_changed_field(api, admin_api):
    api.post("/api/v1/experiences/", NEW, format="json")
    api.patch("/api/v1/experiences/file-validation/", {"what": "Check.\nThen read.", "who": []}, format="json")
    body = api.get("/api/v1/experiences/file-validation/diff/", {"a": 1, "b": 2}).json()
    diff = body["diff"]
    assert diff["when"] == "" and diff["status"] == ""
    assert diff["what"].splitlines() == ["--- what (r1)", "+++ what (r2)", "@@ -1 +1,2 @@", " Check.", "+Then read."]
    assert "-CodeInterpreter" in diff["who"] and "+(every role)" in diff["who"]
    assert api.get("/api/v1/experiences/file-validation/diff/", {"a": 1, "b": 9}).status_code == 404
    assert api.get("/api/v1/experiences/file-validation/diff/", {"a": 1}).status_code == 400


def test_delete_needs_an_admin_key(api, admin_api):
    api.post("/api/v1/experiences/", NEW, format="json")
    assert api.delete("/api/v1/experiences/file-validation/").status_code == 403
    assert admin_api.delete("/api/v1/experiences/file-validation/").status_code == 204
    assert not Experience.objects.exists()


def test_settings_default_and_update(api, admin_api):
    initial = api.get("/api/v1/experiences/config/").json()
    assert initial["use_experience"] == {} and initial["selection_template"] == ""
    assert initial["effective_template"] == initial["default_template"]
    assert "{experiences}" in initial["default_template"]
    body = {"use_experience": {"planner": True, "code_generator": False}, "llm_alias": "offline"}
    assert api.put("/api/v1/experiences/config/", body, format="json").status_code == 403
    saved = admin_api.put("/api/v1/experiences/config/", body, format="json").json()
    assert saved["use_experience"] == body["use_experience"] and saved["llm_alias"] == "offline"
    assert saved["updated_by"] == "key:alpha-admin"
    bad = admin_api.put("/api/v1/experiences/config/", {"llm_alias": "gpt-9"}, format="json")
    assert bad.status_code == 400


def test_selection_log_list_detail_and_prompt_log_file_download(api, tenant, settings):
    settings.LLM_BASE_URL, settings.LLM_BACKEND = "", ""
    add_experience(tenant.team, "plot-style", when="Use when asked for a chart.", what="Label axes.")
    selected = api.post(
        "/api/v1/experiences/select/",
        {"role": "Planner", "query": "make a chart", "round_id": "round-3", "post_id": "post-7"},
        format="json",
    ).json()
    listed = api.get("/api/v1/experience-selections/", {"role": "Planner"}).json()
    assert [log["id"] for log in listed["results"]] == [selected["log_id"]]
    assert api.get("/api/v1/experience-selections/", {"role": "Coder"}).json()["count"] == 0
    detail = api.get(f"/api/v1/experience-selections/{selected['log_id']}/").json()
    assert detail["selected"] == ["plot-style"] and detail["backend"] == "extractive"

    download = api.get(f"/api/v1/experience-selections/{selected['log_id']}/download/")
    assert download.status_code == 200
    expected_name = "planner_experience_selection_log_round-3_post-7.json"
    assert download["Content-Disposition"] == f'attachment; filename="{expected_name}"'
    assert json.loads(download.content) == SelectionLog.objects.get().messages == selected["messages"]


def test_the_admin_validates_and_writes_through_the_services(admin_client, tenant):
    url = "/admin/experiences_app/experience/add/"
    form = {"team": tenant.team.pk, "exp_id": "from-admin", "who_text": "Planner\n", "when": "w", "status": "draft"}
    form.update({"revisions-TOTAL_FORMS": "0", "revisions-INITIAL_FORMS": "0"})  # the read-only inline
    refused = admin_client.post(url, {**form, "what": "   "})
    assert refused.status_code == 200 and not Experience.objects.exists()
    assert admin_client.post(url, {**form, "what": "do it"}).status_code == 302
    experience = Experience.objects.get()
    assert (experience.who, experience.roles_key, experience.revision) == (["Planner"], "|planner|", 1)
    assert experience.author == "user:admin"
    changelist = "/admin/experiences_app/experience/"
    admin_client.post(changelist, {"action": "approve_selected", "_selected_action": [experience.pk]})
    experience.refresh_from_db()
    assert (experience.status, experience.reviewer, experience.revision) == ("approved", "user:admin", 2)


def test_the_admin_refuses_two_spellings_of_one_switch_that_disagree(admin_client, tenant):
    url = "/admin/experiences_app/teamexperienceconfig/add/"
    form = {"team": tenant.team.pk, "selection_template": "", "llm_alias": ""}
    flags = '{"code_generator": false, "CodeInterpreter": true}'
    refused = admin_client.post(url, {**form, "use_experience": flags})
    assert refused.status_code == 200 and "both set use_experience" in refused.content.decode()
    assert not TeamExperienceConfig.objects.exists()
    assert admin_client.post(url, {**form, "use_experience": '{"code_generator": false}'}).status_code == 302
    assert TeamExperienceConfig.objects.get().use_experience == {"code_generator": False}
