"""Experience selection (the selection flow) against the scripted OpenAI-compatible server, and offline."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from experiences_app.models import SelectionLog
from experiences_app.selection import INJECTED_DELIMITER
from tests.experiences_app.conftest import add_experience
from tests.llm_server import Fail, Garbage, Reply

pytestmark = pytest.mark.django_db

FILE_WHEN = "Use when user requests file operations or FileNotFoundError occurred."
FILE_WHAT = "Always check os.path.exists() before reading files."
PLOT_WHEN = "Use when the user asks for a chart or plot of data."
PLOT_WHAT = "Label both axes and give every plot a title."


@pytest.fixture
def experiences(tenant):
    add_experience(tenant.team, "file-validation", when=FILE_WHEN, what=FILE_WHAT, who=["CodeInterpreter"])
    add_experience(tenant.team, "plot-style", when=PLOT_WHEN, what=PLOT_WHAT)  # every role
    add_experience(tenant.team, "planner-only", when="Use when planning steps.", what="Plan briefly.", who=["Planner"])
    add_experience(tenant.team, "draft-one", when="Use when files are read.", what="DRAFT WHAT", status="draft")
    add_experience(tenant.team, "disabled-one", when="Use when files are read.", what="OFF WHAT", status="disabled")


def select(api, **body):
    body.setdefault("role", "CodeInterpreter")
    body.setdefault("query", "read data.csv and plot it")
    return api.post("/api/v1/experiences/select/", body, format="json")


def prompt_of(request_body) -> str:
    return request_body["messages"][-1]["content"]


def test_it_selects_from_a_json_object_and_injects_only_the_what_texts(api, experiences, llm_server):
    llm_server.script(Reply('{"file-validation": true, "plot-style": false}'))
    response = select(api, round_id="r1", post_id="p2")

    assert response.status_code == 200, response.content
    body = response.json()
    assert [c["exp_id"] for c in body["candidates"]] == ["file-validation", "plot-style"]
    assert body["selected"] == [{"exp_id": "file-validation", "what": FILE_WHAT}]
    assert FILE_WHAT in body["prompt_text"] and "file-validation" in body["prompt_text"]
    assert INJECTED_DELIMITER in body["prompt_text"] and PLOT_WHAT not in body["prompt_text"]
    # The LLM saw only `when` texts, asked for a JSON object.
    sent = llm_server.requests[-1]
    assert sent["response_format"] == {"type": "json_object"}
    assert FILE_WHEN in prompt_of(sent) and PLOT_WHEN in prompt_of(sent)
    for hidden in (FILE_WHAT, PLOT_WHAT, "draft-one", "disabled-one", "planner-only"):
        assert hidden not in prompt_of(sent)

    log = SelectionLog.objects.get(pk=body["log_id"])
    assert log.selected == ["file-validation"]
    assert log.raw_response == '{"file-validation": true, "plot-style": false}'
    assert log.messages == sent["messages"] == body["messages"]
    assert (log.backend, log.model, log.role) == ("openai", "scripted-model", "CodeInterpreter")
    assert (log.round_id, log.post_id, log.error) == ("r1", "p2", "")
    assert log.candidates == body["candidates"]
    assert (log.prompt_tokens, log.completion_tokens) == (11, 7)


def assert_logged(body: dict, sent: dict, *, query: str, raw: str, selected: list[str]) -> None:
    """The log row holds everything the selection's prompt log file does: what was shown, answered and chosen."""
    log = SelectionLog.objects.get(pk=body["log_id"])
    assert (log.role, log.query) == ("CodeInterpreter", query)
    assert log.candidates == body["candidates"]
    assert log.messages == sent["messages"] == body["messages"]
    assert log.raw_response == raw == body["raw_response"]
    assert log.selected == selected == [s["exp_id"] for s in body["selected"]]
    assert (log.backend, log.model, log.error) == ("openai", "scripted-model", "")
    assert log.latency_ms == body["latency_ms"] >= 0


ANSWER_FORMS = {
    "object": ('{"file-validation": true, "plot-style": false}', ["file-validation"]),
    "object-with-string-flags": ('{"file-validation": "false", "plot-style": "yes"}', ["plot-style"]),
    "array": ('["plot-style"]', ["plot-style"]),
    "array-in-a-fence": ('```json\n["file-validation", "plot-style"]\n```', ["file-validation", "plot-style"]),
    "plain-text": (
        "Both apply: plot-style, and file-validation because a file is read.",
        ["file-validation", "plot-style"],
    ),
    "not-candidates": (
        '{"draft-one": true, "disabled-one": true, "planner-only": true, "made-up": true, "plot-style": true}',
        ["plot-style"],
    ),
    "only-not-candidates": ('["draft-one", "planner-only", "made-up"]', []),
    "plain-text-not-candidates": ("Use planner-only and draft-one.", []),
    "garbage": ("I cannot help with that {", []),
    "empty": ("", []),
}


@pytest.mark.parametrize("answer, chosen", ANSWER_FORMS.values(), ids=ANSWER_FORMS.keys())
def test_each_answer_form_selects_only_candidates_and_is_logged(api, experiences, llm_server, answer, chosen):
    llm_server.script(Reply(answer))
    response = select(api, query="read data.csv and plot it")
    assert response.status_code == 200, response.content
    body = response.json()

    assert [c["exp_id"] for c in body["candidates"]] == ["file-validation", "plot-style"]
    assert [s["exp_id"] for s in body["selected"]] == chosen
    for hidden in ("draft-one", "disabled-one", "planner-only", "made-up"):
        assert hidden not in body["prompt_text"]
    if chosen:
        assert body["prompt_text"].count(INJECTED_DELIMITER) >= 1
    else:
        assert body["prompt_text"] == ""
    assert_logged(body, llm_server.requests[-1], query="read data.csv and plot it", raw=answer, selected=chosen)


def test_an_unreadable_http_body_answers_503_and_logs_the_failure(api, experiences, llm_server):
    llm_server.script(Garbage())
    response = select(api)
    assert response.status_code == 503
    assert response.json()["error"] == "llm_unavailable"
    log = SelectionLog.objects.get()
    assert "malformed" in log.error and log.selected == [] and log.raw_response == ""
    assert str(log.pk) in response.json()["detail"]


def test_server_errors_answer_503_and_refusals_502(api, experiences, llm_server):
    llm_server.script(Fail(500))
    assert select(api).json()["error"] == "llm_unavailable"
    llm_server.script(Fail(400))
    response = select(api)
    assert response.status_code == 502
    assert response.json()["error"] == "llm_error"
    errors = sorted(SelectionLog.objects.values_list("error", flat=True))
    assert errors == ["request refused (400)", "server error (500)"]


def test_the_who_filter_keeps_the_roles_experiences_and_those_for_every_role(api, experiences, llm_server):
    llm_server.script(Reply("{}"))
    body = select(api, role="planner").json()  # roles compare case-insensitively
    assert [c["exp_id"] for c in body["candidates"]] == ["planner-only", "plot-style"]
    prompt = prompt_of(llm_server.requests[-1])
    assert "planner-only" in prompt and FILE_WHEN not in prompt
    log = SelectionLog.objects.get()
    assert (log.role, log.candidates, log.messages) == (
        "planner",
        body["candidates"],
        llm_server.requests[-1]["messages"],
    )


def test_the_default_template_undoubles_braces_and_keeps_values_literal(api, experiences, llm_server):
    llm_server.script(Reply("{}"))
    body = select(api, query="use {context} and {0} and {{x}}", context="ctx with {user_query}").json()
    prompt = prompt_of(llm_server.requests[-1])
    assert '{"file-validation": true, "plot-style": false}' in prompt  # the template's {{ }} undoubled
    assert "use {context} and {0} and {{x}}" in prompt  # the query is inserted, never formatted
    assert "ctx with {user_query}" in prompt
    assert SelectionLog.objects.get(pk=body["log_id"]).messages[0]["content"] == prompt


def test_a_team_template_replaces_the_default(api, admin_api, experiences, llm_server):
    template = 'Pick ids.\n{experiences}\nQuery: {user_query}\nSeen: {context}\nAnswer like {{"id": true}}'
    saved = admin_api.put("/api/v1/experiences/config/", {"selection_template": template}, format="json")
    assert saved.status_code == 200, saved.content
    llm_server.script(Reply('{"plot-style": true}'))
    body = select(api, context="earlier talk").json()

    sent = llm_server.requests[-1]
    assert prompt_of(sent).startswith("Pick ids.\n- id: file-validation\n  when: " + FILE_WHEN)
    assert prompt_of(sent).endswith('Seen: earlier talk\nAnswer like {"id": true}')
    assert "response_format" not in sent  # OpenAI refuses json_object when the prompt never says JSON
    assert_logged(body, sent, query="read data.csv and plot it", raw='{"plot-style": true}', selected=["plot-style"])
    assert SelectionLog.objects.get().context == "earlier talk"


def test_a_template_with_a_lone_brace_or_unknown_placeholder_is_refused(admin_api):
    for template in ("{experiences} {oops}", "{experiences} {", "no candidates here"):
        response = admin_api.put("/api/v1/experiences/config/", {"selection_template": template}, format="json")
        assert response.status_code == 400
        assert "selection_template" in response.json()["fields"]


def test_a_role_without_use_experience_gets_an_empty_selection_without_an_llm_call(
    api, admin_api, experiences, llm_server
):
    admin_api.put("/api/v1/experiences/config/", {"use_experience": {"code_generator": False}}, format="json")
    body = select(api, role="Code_Generator").json()
    assert body["use_experience"] is False and body["selected"] == [] and body["log_id"] is None
    assert "use_experience is false" in body["skipped"]
    assert llm_server.requests == [] and not SelectionLog.objects.exists()


def test_no_candidates_means_no_llm_call(api, llm_server):
    body = select(api, role="Nobody").json()
    assert body["candidates"] == [] and "no approved experience" in body["skipped"]
    assert llm_server.requests == []


def test_a_session_gives_the_roles_recent_messages_as_context(api, session_id, experiences, llm_server, settings):
    settings.EXPERIENCE_CONTEXT_MESSAGES = 3
    messages = [
        {"role": "user", "content": "ancient planner note", "send_from": "User", "send_to": "Planner"},
        {"role": "assistant", "content": "hello planner", "send_from": "User", "send_to": "Planner"},
        {"role": "assistant", "content": "secret for the interpreter", "send_from": "Planner", "send_to": "Coder"},
        {"role": "assistant", "content": "plan: read the csv", "send_from": "Planner", "send_to": "User"},
        {"role": "user", "content": "thanks {0}", "send_from": "User", "send_to": "Planner"},
    ]
    api.post(f"/api/v1/sessions/{session_id}/messages/", {"messages": messages}, format="json")
    llm_server.script(Reply("{}"))
    body = select(api, role="planner", session_id=session_id, query="q").json()

    assert body["context"] == "Planner -> Coder: secret for the interpreter\nPlanner -> User: plan: read the csv\n" + (
        "User -> Planner: thanks {0}"
    )
    assert body["context"] in prompt_of(llm_server.requests[-1])
    assert str(SelectionLog.objects.get().session_id) == session_id


def test_context_and_session_together_are_refused(api, session_id):
    response = select(api, context="x", session_id=session_id)
    assert response.status_code == 400 and "context" in response.json()["fields"]


def test_the_offline_backend_selects_by_relevance(api, experiences, settings):
    settings.LLM_BASE_URL, settings.LLM_BACKEND = "", ""
    body = select(api, query="I got FileNotFoundError opening report.txt").json()
    assert [s["exp_id"] for s in body["selected"]] == ["file-validation"]
    log = SelectionLog.objects.get(pk=body["log_id"])
    assert log.backend == "extractive" and json.loads(log.raw_response) == {
        "file-validation": True,
        "plot-style": False,
    }


def test_the_offline_alias_keeps_the_llm_out(api, admin_api, experiences, llm_server):
    admin_api.put("/api/v1/experiences/config/", {"llm_alias": "offline"}, format="json")
    body = select(api, query="draw a chart plot of sales").json()
    assert [s["exp_id"] for s in body["selected"]] == ["plot-style"]
    assert llm_server.requests == [] and body["backend"] == "extractive"


def test_selection_reads_a_bounded_number_of_queries(api, tenant, experiences, settings):
    settings.LLM_BASE_URL, settings.LLM_BACKEND = "", ""
    for index in range(30):
        add_experience(tenant.team, f"extra-{index}", when=f"Use when topic {index} comes up.", what="x")
    with CaptureQueriesContext(connection) as queries:
        assert select(api).status_code == 200
    # ... and one for the experiences it did not offer, however many there are.
    assert len(queries) <= 7, [q["sql"] for q in queries]


# --- which role a use_experience switch governs ---------------------------------------------------


def put_switches(admin_api, switches: dict[str, bool]):
    return admin_api.put("/api/v1/experiences/config/", {"use_experience": switches}, format="json")


def test_the_code_generator_switch_governs_the_code_interpreter_role(api, admin_api, experiences, llm_server):
    assert put_switches(admin_api, {"code_generator": False}).status_code == 200
    body = select(api, role="CodeInterpreter").json()
    assert body["use_experience"] is False and body["selected"] == [] and body["log_id"] is None
    assert "code_generator.use_experience" in body["skipped"]
    assert llm_server.requests == [] and not SelectionLog.objects.exists()

    llm_server.script(Reply("{}"))
    assert select(api, role="Planner").json()["use_experience"] is True  # the planner switch is not set


def test_the_planner_switch_governs_the_planner_role(api, admin_api, experiences, llm_server):
    put_switches(admin_api, {"planner": False, "code_generator": True})
    assert select(api, role="Planner").json()["use_experience"] is False
    llm_server.script(Reply("{}"))
    assert select(api, role="CodeInterpreter").json()["use_experience"] is True


def test_a_switch_may_also_be_spelled_as_the_role_name(api, admin_api, experiences, llm_server):
    put_switches(admin_api, {"CodeInterpreter": False})
    body = select(api, role="codeinterpreter").json()
    assert body["use_experience"] is False and "use_experience is false" in body["skipped"]
    assert llm_server.requests == []


def test_two_spellings_of_one_switch_that_disagree_are_refused(admin_api):
    response = put_switches(admin_api, {"code_generator": False, "CodeInterpreter": True})
    assert response.status_code == 400
    message = " ".join(response.json()["fields"]["use_experience"])
    assert "code_generator" in message and "CodeInterpreter" in message
    assert put_switches(admin_api, {"code_generator": False, "CodeInterpreter": False}).status_code == 200


def test_the_settings_say_which_role_each_switch_governs(api):
    assert api.get("/api/v1/experiences/config/").json()["switches"] == {
        "planner": "Planner",
        "code_generator": "CodeInterpreter",
    }


# --- the selection context follows the role's rounds ------------------------------------------------


def test_the_context_of_a_session_leaves_failed_rounds_out(api, session_id, experiences, llm_server):
    rounds = f"/api/v1/sessions/{session_id}/rounds/"

    def add_round(query: str, posts: list[tuple[str, str, str]], state: str) -> None:
        round_id = api.post(rounds, {"user_query": query}, format="json").json()["id"]
        for message, send_from, send_to in posts:
            body = {"message": message, "send_from": send_from, "send_to": send_to}
            assert api.post(f"{rounds}{round_id}/posts/", body, format="json").status_code == 201
        api.patch(f"{rounds}{round_id}/", {"state": state}, format="json")

    add_round(
        "count rows", [("count them", "Planner", "CodeInterpreter"), ("42", "CodeInterpreter", "Planner")], "finished"
    )
    add_round(
        "plot", [("plot it", "Planner", "CodeInterpreter"), ("broken attempt", "CodeInterpreter", "Planner")], "failed"
    )
    add_round("plot again", [("plot it with labels", "Planner", "CodeInterpreter")], "created")
    llm_server.script(Reply("{}"))
    body = select(api, role="CodeInterpreter", session_id=session_id, query="q").json()

    assert body["context"] == (
        "Planner -> CodeInterpreter: count them\nCodeInterpreter -> Planner: 42\n"
        "Planner -> CodeInterpreter: plot it with labels"
    )
    assert "broken attempt" not in prompt_of(llm_server.requests[-1])


def test_a_selection_says_which_experiences_it_did_not_offer_and_why(api, experiences, llm_server):
    llm_server.script(Reply('{"file-validation": true}'))

    body = select(api).json()

    expected = [
        {"exp_id": "disabled-one", "reason": "disabled"},
        {"exp_id": "draft-one", "reason": "draft r1: never approved"},
        {"exp_id": "planner-only", "reason": "for Planner, not CodeInterpreter"},
    ]
    assert body["not_offered"] == expected
    logged = api.get(f"/api/v1/experience-selections/{body['log_id']}/").json()
    assert logged["not_offered"] == expected
