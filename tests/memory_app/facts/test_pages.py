"""Facts pages of the dashboard: the table and its filters, one fact, the graph data, the
quarantined extractions, the curator-only curation, and the facts queue on the ops page."""

from __future__ import annotations

import json
import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from memory_app.conversations import services
from memory_app.conversations.models import Session
from memory_app.facts import extraction as fact_extraction
from memory_app.facts import services as facts
from memory_app.facts.models import Fact, FactExtractionRun
from memory_app.jobs.dispatchers import Sent
from memory_app.tenancy.models import TeamMembership
from tests.conftest import Tenant
from tests.job_dispatch import Sends

FACTS = reverse("dashboard:facts")
GRAPH = reverse("dashboard:fact_graph")
GRAPH_DATA = reverse("dashboard:fact_graph_data")
QUARANTINE = reverse("dashboard:fact_extractions")
OPS = reverse("dashboard:ops")
PASSWORD = "correct horse battery"


@pytest.fixture(autouse=True)
def sent(job_outbox: list[Sent]) -> Sends:
    """Extraction tasks recorded instead of going to a broker (compaction ones too, left out here)."""
    return Sends(job_outbox, fact_extraction.JOB)


@pytest.fixture
def user(tenant: Tenant):
    user = get_user_model().objects.create_user("ada", password=PASSWORD)
    TeamMembership.objects.create(team=tenant.team, user=user)
    return user


@pytest.fixture
def member(client: Client, user) -> Client:
    client.force_login(user)
    return client


@pytest.fixture
def curator(tenant: Tenant) -> Client:
    """An admin member of the team: curation rests on the per-team role, not the staff flag."""
    user = get_user_model().objects.create_user("grace", password=PASSWORD)
    TeamMembership.objects.create(team=tenant.team, user=user, is_admin=True)
    client = Client()
    client.force_login(user)
    return client


def chat(tenant: Tenant, external_id: str = "chat", texts: tuple[str, ...] = ()) -> Session:
    session = services.session_create(team=tenant.team, external_id=external_id)
    if texts:
        services.message_append(session=session, messages=[{"role": "user", "content": text} for text in texts])
        session.refresh_from_db()
    return session


def add(tenant: Tenant, subject: str, predicate: str, obj: str, **kwargs) -> Fact:
    fact, _ = facts.fact_add(
        team=tenant.team, role=kwargs.pop("role", "user"), subject=subject, predicate=predicate, object=obj, **kwargs
    )
    return fact


def quarantined(
    session: Session, raw: str = '[{"subject": "Ada", "predicate": "works at"', **fields
) -> FactExtractionRun:
    defaults = {
        "status": FactExtractionRun.Status.QUARANTINED,
        "trigger": FactExtractionRun.Trigger.MANUAL,
        "from_seq": 1,
        "to_seq": session.last_seq,
        "raw_output": raw,
        "error": "the output is not valid JSON (truncated)",
        "attempts": 1,
        "backend": "openai",
        "model": "scripted-model",
        "finished_at": timezone.now(),
    }
    return FactExtractionRun.objects.create(team_id=session.team_id, session=session, **{**defaults, **fields})


def rows(html: str) -> list[str]:
    return re.findall(r'<tr id="fact-[^"]+" class="fact-row.*?</tr>', html, flags=re.S)


def triples(html: str) -> list[str]:
    """The facts of the table as read: "Ada lives in Oslo"."""
    found = [re.search(r'<span class="triple">(.*?)</span>\s*</td>', row, re.S).group(1) for row in rows(html)]
    return sorted(" ".join(re.sub(r"<[^>]+>", " ", text).split()) for text in found)


def flashes(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def url(name: str, *args) -> str:
    return reverse(f"dashboard:{name}", args=args)


# --- who may see what --------------------------------------------------------------------------------


def test_anonymous_visitors_are_sent_to_log_in(client: Client, tenant: Tenant) -> None:
    fact = add(tenant, "Ada", "lives in", "Oslo")
    run = quarantined(chat(tenant, texts=("hello",)))
    for target in (
        FACTS,
        GRAPH,
        GRAPH_DATA + "?entity=Ada",
        QUARANTINE,
        url("fact", fact.pk),
        url("fact_extraction", run.pk),
    ):
        response = client.get(target)
        assert response.status_code == 302, target
        assert response["Location"].startswith(reverse("login"))
    response = client.post(url("fact_invalidate", fact.pk))
    assert response.status_code == 302
    fact.refresh_from_db()
    assert fact.invalidated_at is None


def test_the_table_shows_only_the_current_teams_facts(member: Client, tenant: Tenant, other_tenant: Tenant) -> None:
    add(tenant, "Ada", "lives in", "Oslo")
    theirs = add(other_tenant, "Mallory", "knows", "the secret plans")

    response = member.get(FACTS)

    html = response.content.decode()
    assert response.status_code == 200
    assert "Oslo" in html
    assert "Mallory" not in html and "secret plans" not in html
    assert 'aria-current="page">Facts</a>' in html
    assert member.get(url("fact", theirs.pk)).status_code == 404
    data = member.get(GRAPH_DATA, {"entity": "Mallory", "depth": 2}).json()
    assert data["edges"] == []


def test_another_teams_fact_and_extraction_cannot_be_seen_or_curated_by_staff(
    curator: Client, other_tenant: Tenant, sent: Sends
) -> None:
    fact = add(other_tenant, "Mallory", "knows", "the secret plans")
    for action in ("fact_invalidate", "fact_restore", "fact_edit"):
        form = {"subject": "x", "predicate": "y", "object": "z", "role": "user"}
        assert curator.post(url(action, fact.pk), form).status_code == 404
    fact.refresh_from_db()
    assert (fact.subject, fact.invalidated_at) == ("Mallory", None)
    theirs = quarantined(chat(other_tenant, texts=("Eve works at Initech.",)), raw="their secret output")

    assert "their secret output" not in curator.get(QUARANTINE).content.decode()
    assert curator.get(url("fact_extraction", theirs.pk)).status_code == 404
    for action in ("fact_extraction_retry", "fact_extraction_discard", "fact_extraction_accept"):
        assert curator.post(url(action, theirs.pk), {"output": "[]"}).status_code == 404
    theirs.refresh_from_db()
    assert theirs.status == "quarantined" and sent == []


# --- the table: filters, provenance, pages ----------------------------------------------------------------


def test_filters_narrow_the_table(member: Client, tenant: Tenant) -> None:
    planner = chat(tenant, "planner")
    add(tenant, "Ada", "lives in", "Oslo", session=planner)
    add(tenant, "Ada", "works at", "Acme", role="assistant")
    add(tenant, "Bob", "likes", "Oslo jazz")

    def shown(**query) -> list[str]:
        return triples(member.get(FACTS, query).content.decode())

    assert shown() == ["Ada lives in Oslo", "Ada works at Acme", "Bob likes Oslo jazz"]
    assert shown(subject="  ADA ") == ["Ada lives in Oslo", "Ada works at Acme"]
    assert shown(predicate="Works At") == ["Ada works at Acme"]
    assert shown(object="oslo") == ["Ada lives in Oslo"]
    assert shown(role="assistant") == ["Ada works at Acme"]
    assert shown(q="oslo") == ["Ada lives in Oslo", "Bob likes Oslo jazz"]
    assert shown(session="planner") == ["Ada lives in Oslo"]
    assert shown(session=str(planner.pk)) == ["Ada lives in Oslo"]
    response = member.get(FACTS, {"session": "no-such-session"})
    assert rows(response.content.decode()) == []
    assert "No session of this team has that id or external id." in response.content.decode()


def test_invalidated_facts_are_hidden_unless_asked_for_and_marked_with_their_replacement(
    member: Client, tenant: Tenant
) -> None:
    old = add(tenant, "user", "lives in", "Paris")  # "lives in" is single-valued
    new = add(tenant, "user", "lives in", "Oslo")
    old.refresh_from_db()
    assert old.invalidated_by_id == new.pk

    live = member.get(FACTS).content.decode()
    everything = member.get(FACTS, {"include_invalidated": "on"}).content.decode()

    assert "Paris" not in live
    (old_row,) = [row for row in rows(everything) if "Paris" in row]
    assert 'class="fact-row invalidated"' in old_row
    assert ">invalidated</span>" in old_row
    assert f'href="{url("fact", new.pk)}">replaced by' in old_row
    (new_row,) = [row for row in rows(everything) if "Oslo" in row]
    assert "invalidated" not in new_row


def test_as_of_shows_what_was_true_then(member: Client, tenant: Tenant) -> None:
    old = add(tenant, "user", "lives in", "Paris")
    Fact.objects.filter(pk=old.pk).update(valid_from=timezone.now() - timedelta(days=2))
    add(tenant, "user", "lives in", "Oslo")
    Fact.objects.filter(pk=old.pk).update(invalidated_at=timezone.now() - timedelta(days=1))
    then = (timezone.now() - timedelta(days=1, hours=12)).strftime("%Y-%m-%dT%H:%M:%S")

    html = member.get(FACTS, {"as_of": then}).content.decode()

    assert [("Paris" in row, "Oslo" in row) for row in rows(html)] == [(True, False)]


def test_each_row_links_to_its_source_message_and_extraction_run(
    member: Client, curator: Client, tenant: Tenant
) -> None:
    session = chat(tenant, "planner", texts=("good morning", "Ada works at Acme since May."))
    run = quarantined(session)
    fact_extraction.fact_extraction_accept(
        run=run, output='[{"subject": "Ada", "predicate": "works at", "object": "Acme"}]'
    )

    (row,) = rows(member.get(FACTS).content.decode())

    message_link = f'href="{url("session", session.pk)}?after=1#m2"'
    assert message_link in row and ">message #2</a>" in row
    assert f'href="{url("fact_extraction", run.pk)}"' in row
    assert '<code class="extractor">manual</code>' in row
    # ...and the link lands on that message in the timeline.
    timeline = member.get(f"{url('session', session.pk)}?after=1").content.decode()
    assert 'id="m2"' in timeline and "Ada works at Acme since May." in timeline


def test_the_table_pages_fifty_facts_at_a_time(member: Client, tenant: Tenant) -> None:
    for n in range(51):
        add(tenant, f"entity {n}", "is", "counted")

    first = member.get(FACTS).content.decode()
    second = member.get(FACTS, {"page": 2}).content.decode()

    assert len(rows(first)) == 50 and len(rows(second)) == 1
    assert "51 facts" in first and "Page 1 of 2" in first
    assert "entity 0" in second  # oldest last


def test_the_table_takes_a_fixed_number_of_queries(member: Client, tenant: Tenant, django_assert_num_queries) -> None:
    session = chat(tenant, "planner", texts=("Ada works at Acme.",))
    for n in range(20):
        add(tenant, f"entity {n}", "is in", "planner", session=session)

    # session + user, memberships, quarantine count, page count, page rows (with session and source seq)
    with django_assert_num_queries(6):
        member.get(FACTS)


# --- one fact, and the curator edits ------------------------------------------------------------------------


def test_members_who_are_not_staff_see_no_controls_and_are_refused(member: Client, tenant: Tenant) -> None:
    fact = add(tenant, "Ada", "lives in", "Oslo")
    html = member.get(FACTS).content.decode() + member.get(url("fact", fact.pk)).content.decode()
    assert url("fact_invalidate", fact.pk) not in html and url("fact_edit", fact.pk) not in html

    for action, data in (("fact_invalidate", {}), ("fact_restore", {}), ("fact_edit", {"subject": "Eve"})):
        response = member.post(url(action, fact.pk), data)
        assert response.status_code == 403
        assert b"Team admins only" in response.content
    fact.refresh_from_db()
    assert (fact.subject, fact.invalidated_at) == ("Ada", None)


def test_team_admins_invalidate_and_restore_a_fact_and_go_back_to_the_table(curator: Client, tenant: Tenant) -> None:
    fact = add(tenant, "Ada", "lives in", "Oslo")
    back = f"{FACTS}?q=ada"

    response = curator.post(url("fact_invalidate", fact.pk), {"next": back}, follow=True)

    fact.refresh_from_db()
    assert fact.invalidated_at is not None and fact.invalidated_by is None
    assert response.redirect_chain == [(back, 302)]
    assert flashes(response) == ["Invalidated “(Ada, lives in, Oslo)”. It stays in the history and can be restored."]
    assert Fact.objects.filter(pk=fact.pk).exists()  # never deleted

    response = curator.post(url("fact_restore", fact.pk), {"next": "https://evil.example/"}, follow=True)

    fact.refresh_from_db()
    assert fact.invalidated_at is None
    assert response.redirect_chain == [(url("fact", fact.pk), 302)]  # an off-site `next` is ignored


def test_restoring_while_an_identical_fact_is_live_shows_the_conflict(curator: Client, tenant: Tenant) -> None:
    fact = add(tenant, "Ada", "likes", "tea")
    facts.fact_invalidate(fact=fact)
    add(tenant, "Ada", "likes", "tea")

    response = curator.post(url("fact_restore", fact.pk), follow=True)

    assert flashes(response) == ["The same fact is already live in this scope."]
    fact.refresh_from_db()
    assert fact.invalidated_at is not None


def test_team_admins_edit_a_fact_through_the_service(curator: Client, tenant: Tenant) -> None:
    fact = add(tenant, "Ada", "likes", "tea")
    page = curator.get(url("fact", fact.pk)).content.decode()
    assert f'action="{url("fact_edit", fact.pk)}"' in page and 'value="tea"' in page

    response = curator.post(
        url("fact_edit", fact.pk),
        {"subject": "Ada", "predicate": "likes", "object": "  Green Tea", "role": "assistant", "confidence": "0.5"},
        follow=True,
    )

    fact.refresh_from_db()
    assert (fact.object, fact.object_norm, fact.role, fact.confidence) == ("  Green Tea", "green tea", "assistant", 0.5)
    assert flashes(response) == ["Fact saved."]
    assert list(facts_live_objects(tenant)) == ["  Green Tea"]


def facts_live_objects(tenant: Tenant) -> list[str]:
    return list(Fact.objects.filter(team=tenant.team, invalidated_at=None).values_list("object", flat=True))


def test_an_edit_that_duplicates_a_live_fact_or_empties_a_term_is_refused(curator: Client, tenant: Tenant) -> None:
    fact = add(tenant, "Ada", "likes", "tea")
    add(tenant, "Ada", "likes", "coffee")
    form = {"subject": "Ada", "predicate": "likes", "role": "user"}

    duplicate = curator.post(url("fact_edit", fact.pk), {**form, "object": "COFFEE"})
    blank = curator.post(url("fact_edit", fact.pk), {**form, "object": "   "})
    out_of_range = curator.post(url("fact_edit", fact.pk), {**form, "object": "tea", "confidence": "7"})

    assert duplicate.status_code == 409
    assert "The same fact is already live in this scope." in duplicate.content.decode()
    assert 'value="COFFEE"' in duplicate.content.decode()  # what was typed is kept
    assert blank.status_code == 400
    assert out_of_range.status_code == 400
    fact.refresh_from_db()
    assert (fact.object, fact.confidence) == ("tea", None)


def test_the_detail_page_shows_the_history_both_ways(member: Client, tenant: Tenant) -> None:
    old = add(tenant, "user", "lives in", "Paris")
    new = add(tenant, "user", "lives in", "Oslo")

    old_page = member.get(url("fact", old.pk)).content.decode()
    new_page = member.get(url("fact", new.pk)).content.decode()

    assert f'class="replaced-by" href="{url("fact", new.pk)}"' in old_page
    assert "invalidated-pill" in old_page
    assert "It replaced" in new_page and url("fact", old.pk) in new_page


# --- CSRF ---------------------------------------------------------------------------------------------------


def test_team_admins_forms_post_with_a_csrf_token_and_are_refused_without(tenant: Tenant) -> None:
    user = get_user_model().objects.create_user("grace", password=PASSWORD)
    TeamMembership.objects.create(team=tenant.team, user=user, is_admin=True)
    fact = add(tenant, "Ada", "lives in", "Oslo")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    html = client.get(FACTS).content.decode()
    form = re.search(
        r'<form method="post" action="([^"]+invalidate/)".*?name="csrfmiddlewaretoken" value="([^"]+)"', html, re.S
    )
    assert form is not None and form.group(1) == url("fact_invalidate", fact.pk)

    refused = client.post(form.group(1))
    fact.refresh_from_db()
    assert refused.status_code == 403 and fact.invalidated_at is None

    accepted = client.post(form.group(1), {"csrfmiddlewaretoken": form.group(2)})
    fact.refresh_from_db()
    assert accepted.status_code == 302 and fact.invalidated_at is not None

    post_forms = re.findall(r'<form method="post".*?</form>', html, flags=re.S)
    assert len(post_forms) >= 2 and all("csrfmiddlewaretoken" in f for f in post_forms)


def test_the_actions_need_a_post(curator: Client, tenant: Tenant) -> None:
    fact = add(tenant, "Ada", "lives in", "Oslo")
    run = quarantined(chat(tenant, texts=("hi",)))
    for target in (
        url("fact_invalidate", fact.pk),
        url("fact_restore", fact.pk),
        url("fact_edit", fact.pk),
        url("fact_extraction_retry", run.pk),
        url("fact_extraction_accept", run.pk),
        url("fact_extraction_discard", run.pk),
    ):
        assert curator.get(target).status_code == 405, target


# --- quarantined extractions --------------------------------------------------------------------------------


def test_the_quarantine_lists_raw_output_error_and_input_range(member: Client, tenant: Tenant) -> None:
    session = chat(tenant, "planner", texts=("one", "two", "three"))
    run = quarantined(session, raw='Sure! <b>[{"subject": "Ada"', from_seq=2, to_seq=3)
    FactExtractionRun.objects.create(team=tenant.team, session=session, trigger="manual", status="done")

    response = member.get(QUARANTINE)

    html = response.content.decode()
    assert [r.pk for r in response.context["page"]] == [run.pk]
    assert "Sure! &lt;b&gt;[{&quot;subject&quot;: &quot;Ada&quot;" in html
    assert "the output is not valid JSON (truncated)" in html
    assert f'href="{url("session", session.pk)}?after=1#m2">messages #2\N{EN DASH}#3</a>' in html
    assert '<span class="count-badge"' in html
    assert url("fact_extraction_accept", run.pk) not in html  # no curation for non-curator


def test_team_admins_accept_an_edited_output_and_its_facts_appear(curator: Client, tenant: Tenant) -> None:
    session = chat(tenant, "planner", texts=("Ada works at Acme.", "Ada lives in Oslo."))
    run = quarantined(session)
    page = curator.get(QUARANTINE).content.decode()
    assert f'action="{url("fact_extraction_accept", run.pk)}"' in page
    assert "[{&quot;subject&quot;: &quot;Ada&quot;, &quot;predicate&quot;: &quot;works at&quot;</textarea>" in page
    edited = json.dumps(
        [
            {"subject": "Ada", "predicate": "works at", "object": "Acme"},
            {"subject": "Ada", "predicate": "lives in", "object": "Oslo"},
        ]
    )

    response = curator.post(url("fact_extraction_accept", run.pk), {"output": edited}, follow=True)

    run.refresh_from_db()
    assert (run.status, run.raw_output, run.facts_added) == ("done", edited, 2)
    assert flashes(response) == ["Accepted: 2 facts added, 0 seen again."]
    created = {f.object: f for f in Fact.objects.filter(extraction_run=run)}
    assert set(created) == {"Acme", "Oslo"}
    assert created["Oslo"].source_message.seq == 2 and created["Oslo"].extractor == "manual"
    table = curator.get(FACTS).content.decode()
    assert "Acme" in table and "Oslo" in table
    assert run.pk not in {r.pk for r in curator.get(QUARANTINE).context["page"]}


def test_an_output_that_still_does_not_parse_is_shown_again_with_the_reason(curator: Client, tenant: Tenant) -> None:
    run = quarantined(chat(tenant, texts=("Ada works at Acme.",)))

    response = curator.post(url("fact_extraction_accept", run.pk), {"output": '[{"subject": "Ada", "object": 3}] tail'})

    assert response.status_code == 400
    html = response.content.decode()
    assert "Not accepted: output:" in html
    assert "[{&quot;subject&quot;: &quot;Ada&quot;, &quot;object&quot;: 3}] tail</textarea>" in html
    run.refresh_from_db()
    assert run.status == "quarantined" and not Fact.objects.exists()


def test_team_admins_retry_and_discard_through_the_services(
    curator: Client, tenant: Tenant, sent: Sends, django_capture_on_commit_callbacks
) -> None:
    session = chat(tenant, texts=("Ada works at Acme.",))
    retried, discarded = quarantined(session), quarantined(session, status="failed")

    with django_capture_on_commit_callbacks(execute=True):
        first = curator.post(url("fact_extraction_retry", retried.pk), {"next": QUARANTINE}, follow=True)
    second = curator.post(url("fact_extraction_discard", discarded.pk), follow=True)

    retried.refresh_from_db()
    discarded.refresh_from_db()
    assert (retried.status, retried.attempts) == ("pending", 0)
    assert sent.ids == [str(retried.pk)]
    assert first.redirect_chain == [(QUARANTINE, 302)]
    assert flashes(first) == ["Extraction queued again: a worker will run it over the same input shortly."]
    assert discarded.status == "discarded"
    assert second.redirect_chain == [(url("fact_extraction", discarded.pk), 302)]
    discarded_list = curator.get(QUARANTINE, {"status": "discarded"})
    assert [r.pk for r in discarded_list.context["page"]] == [discarded.pk]


def test_curating_a_run_that_is_not_quarantined_shows_the_conflict(curator: Client, tenant: Tenant) -> None:
    run = quarantined(chat(tenant, texts=("hi",)), status="done", raw="[]")

    for action in ("fact_extraction_retry", "fact_extraction_discard", "fact_extraction_accept"):
        response = curator.post(url(action, run.pk), {"output": "[]"}, follow=True)
        assert flashes(response) == [
            f"Only a quarantined or failed extraction can be {verb} (this one is done)."
            for verb in [
                {"fact_extraction_retry": "retried", "fact_extraction_discard": "discarded"}.get(action, "accepted")
            ]
        ]
    run.refresh_from_db()
    assert run.status == "done"


def test_members_who_are_not_staff_cannot_curate(member: Client, tenant: Tenant, sent: Sends) -> None:
    run = quarantined(chat(tenant, texts=("Ada works at Acme.",)))
    output = '[{"subject": "Ada", "predicate": "works at", "object": "Acme"}]'
    for action in ("fact_extraction_retry", "fact_extraction_discard", "fact_extraction_accept"):
        assert member.post(url(action, run.pk), {"output": output}).status_code == 403
    run.refresh_from_db()
    assert run.status == "quarantined" and sent == [] and not Fact.objects.exists()


def test_an_unknown_status_tab_is_404(member: Client, tenant: Tenant) -> None:
    assert member.get(QUARANTINE, {"status": "bogus"}).status_code == 404
    assert member.get(QUARANTINE, {"status": "all"}).status_code == 200


# --- the graph ---------------------------------------------------------------------------------------------------


def test_the_graph_page_embeds_the_selectors_neighbourhood(
    member: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    add(tenant, "Ada", "works at", "Acme")
    add(tenant, "Acme", "is based in", "Oslo")
    add(other_tenant, "Acme", "is owned by", "Mallory")

    response = member.get(GRAPH, {"entity": "ada", "depth": 2})

    html = response.content.decode()
    data = json.loads(re.search(r'<script id="graph-data" type="application/json">(.*?)</script>', html, re.S).group(1))
    expected = selectors_graph(tenant, "ada", 2)
    assert [n["id"] for n in data["nodes"]] == [n["id"] for n in expected.nodes] == ["ada", "acme", "oslo"]
    assert {e["id"] for e in data["edges"]} == {e["id"] for e in expected.edges}
    assert "Mallory" not in html
    assert 'src="/static/js/fact_graph.js"' in html
    assert f'data-url="{GRAPH_DATA}"' in html
    assert 'aria-current="page">Graph</a>' in html


def selectors_graph(tenant: Tenant, entity: str, depth: int):
    from memory_app.facts import selectors as fact_selectors

    return fact_selectors.fact_graph(team=tenant.team, entity=entity, depth=depth)


def test_the_graph_data_recentres_on_any_node(member: Client, tenant: Tenant) -> None:
    add(tenant, "Ada", "works at", "Acme")
    add(tenant, "Acme", "is based in", "Oslo")
    add(tenant, "Oslo", "is in", "Norway")

    one_hop = member.get(GRAPH_DATA, {"entity": "Acme", "depth": 1}).json()
    two_hops = member.get(GRAPH_DATA, {"entity": "Oslo", "depth": 2}).json()

    assert [n["label"] for n in one_hop["nodes"]] == ["Acme", "Ada", "Oslo"]
    assert {(e["source_label"], e["predicate"], e["target_label"]) for e in one_hop["edges"]} == {
        ("Ada", "works at", "Acme"),
        ("Acme", "is based in", "Oslo"),
    }
    assert [n["id"] for n in two_hops["nodes"]] == ["oslo", "acme", "ada", "norway"]
    assert member.get(GRAPH_DATA, {"entity": "Oslo", "depth": 4}).status_code == 400


def test_the_graph_starts_from_the_newest_fact_when_no_entity_is_given(member: Client, tenant: Tenant) -> None:
    add(tenant, "Ada", "works at", "Acme")
    add(tenant, "Bob", "likes", "jazz")

    response = member.get(GRAPH)

    assert response.context["entity"] == "Bob"
    assert response.context["graph"]["nodes"][0]["id"] == "bob"


# --- the facts queue on the ops page ------------------------------------------------------------------------------


def test_the_ops_page_counts_the_facts_queue(client: Client, tenant: Tenant, other_tenant: Tenant) -> None:
    client.force_login(get_user_model().objects.create_user("operator", is_superuser=True))  # sees every team
    mine, theirs = chat(tenant, texts=("a",)), chat(other_tenant, texts=("b",))
    old = FactExtractionRun.objects.create(team=tenant.team, session=mine, trigger="manual", from_seq=1, to_seq=1)
    waited = timezone.now() - timedelta(minutes=7, seconds=3)
    FactExtractionRun.objects.filter(pk=old.pk).update(created_at=waited, pending_since=waited)
    FactExtractionRun.objects.create(team=other_tenant.team, session=theirs, trigger="auto")
    FactExtractionRun.objects.create(team=tenant.team, session=mine, trigger="manual", status="running")
    quarantined(mine)
    quarantined(theirs)
    quarantined(theirs, status="failed", error="gave up after 4 attempts: 429")
    quarantined(mine, status="discarded")
    quarantined(mine, status="done")

    response = client.get(OPS)

    queues = {q.source.kind: q for q in response.context["queues"]}
    stats = queues["facts"].stats
    assert queues["facts"].source.queue == "facts"
    assert (stats.pending, stats.running, stats.failed, stats.quarantined) == (2, 1, 1, 2)
    assert {t.team_name: (t.pending, t.running, t.failed, t.quarantined) for t in stats.by_team} == {
        "alpha": (1, 1, 0, 1),
        "beta": (1, 0, 1, 1),
    }
    html = response.content.decode()
    section = html[html.index('id="queue-facts"') :]
    assert '<div class="stat stat-quarantined alert"><dt>Quarantined</dt><dd>2 ' in section
    assert ">7 min 3 s</span>" in section
    assert "gave up after 4 attempts: 429" in section
    assert queues["compaction"].stats.pending == 0


def test_a_failed_extraction_is_retried_in_place_from_the_ops_page(
    curator: Client, tenant: Tenant, sent: Sends, django_capture_on_commit_callbacks
) -> None:
    session = chat(tenant, "kg-chat", texts=("Ada works at Acme.",))
    run = quarantined(session, status="failed", error="gave up after 4 attempts: 503")
    later = FactExtractionRun.objects.create(team=tenant.team, session=session, trigger="auto", status="done")
    html = curator.get(OPS).content.decode()
    retry = reverse("dashboard:ops_job_retry", args=["facts", run.pk])
    assert f'action="{retry}"' in html  # a later run of the session does not count as a retry
    assert later.pk

    with django_capture_on_commit_callbacks(execute=True):
        response = curator.post(retry, follow=True)

    run.refresh_from_db()
    assert (run.status, run.attempts) == ("pending", 0)
    assert sent.ids == [str(run.pk)]
    assert flashes(response) == [f"Fact extraction: job {run.pk} (session kg-chat) is queued again."]
    assert FactExtractionRun.objects.filter(session=session).count() == 2
    assert f'id="job-{run.pk}"' not in response.content.decode()


def test_a_failed_extraction_without_a_session_is_listed(curator: Client, tenant: Tenant) -> None:
    run = FactExtractionRun.objects.create(
        team=tenant.team, trigger="text", status="failed", error="boom", finished_at=timezone.now()
    )

    html = curator.get(OPS).content.decode()

    assert f'id="job-{run.pk}"' in html


def test_retrying_an_unknown_extraction_is_404(curator: Client, tenant: Tenant) -> None:
    assert curator.post(reverse("dashboard:ops_job_retry", args=["facts", uuid.uuid4()])).status_code == 404
