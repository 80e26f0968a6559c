"""The dashboard's side of recall: the search page (team scoping, highlighting, links to each kind's
source, the filters and their errors, the score breakdown), the session page's recalled-memory
panel, and the search index on the ops page (backlog, failures, the job queue, Reindex)."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from experiences_app import services as experiences
from memory_app.agent_records import services as agent_records
from memory_app.conversations import services
from memory_app.conversations.models import Session
from memory_app.facts import services as facts
from memory_app.search import pages as search_pages
from memory_app.search import services as search
from memory_app.search.documents import Doc
from memory_app.search.models import IndexRun, SearchItem
from memory_app.tenancy.models import TeamMembership
from memory_app.usage.models import ContextServe
from tests.conftest import Tenant

pytestmark = pytest.mark.usefixtures("job_outbox")  # index sends are recorded, never reach a broker

SEARCH = reverse("dashboard:search")
OPS = reverse("dashboard:ops")
OPS_STATUS = reverse("dashboard:ops_status")
REINDEX = reverse("dashboard:ops_search_reindex")


def run_index(team_id: int) -> None:
    """The team's index job, in-process, until nothing is left."""
    search.index_request(team_id=team_id)
    for _ in range(20):
        run = IndexRun.objects.filter(team_id=team_id, status=IndexRun.Status.PENDING).first()
        if run is None:
            return
        assert search.search_index_execute(run_id=str(run.pk)) == "done"
    raise AssertionError("the index job did not settle")


def member_of(client: Client, *tenants: Tenant, admin: bool = False) -> Client:
    user = get_user_model().objects.create_user(f"u-{uuid.uuid4().hex[:6]}")
    for tenant in tenants:
        TeamMembership.objects.create(team=tenant.team, user=user, is_admin=admin)
    client.force_login(user)
    return client


@pytest.fixture
def member(client: Client, tenant: Tenant) -> Client:
    return member_of(client, tenant)


def chat(tenant: Tenant, external_id: str, *texts: str) -> Session:
    session = services.session_create(team=tenant.team, external_id=external_id)
    services.message_append(session=session, messages=[{"role": "user", "content": text} for text in texts])
    return session


def doc(text: str) -> Doc:
    """A piece of text stored as a pending item (what a writer does before the job embeds it)."""
    return Doc(kind="summary", source_key=str(uuid.uuid4()), text=text, occurred_at=timezone.now())


def page(client: Client, **params: Any) -> str:
    response = client.get(SEARCH, params)
    assert response.status_code == 200, response.content[:2000]
    return response.content.decode()


def hit_ids(html: str) -> list[str]:
    return re.findall(r'<li class="hit [^"]*" id="hit-(\d+)"', html)


# --- who sees what --------------------------------------------------------------------------------


def test_a_visitor_who_is_not_logged_in_is_sent_to_log_in(client: Client, db) -> None:
    response = client.get(SEARCH, {"q": "otter"})
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_another_teams_items_never_show(member: Client, tenant: Tenant, other_tenant: Tenant) -> None:
    chat(tenant, "ours", "the otter migration is scheduled for Friday")
    chat(other_tenant, "theirs", "the otter migration secret plan of beta")
    facts.fact_add(team=other_tenant.team, role="ops", subject="otter migration", predicate="owner", object="zebulon")
    run_index(tenant.team.pk)
    run_index(other_tenant.team.pk)

    html = page(member, q="otter migration")

    assert "scheduled for Friday" in html
    assert "secret plan" not in html and "zebulon" not in html and "theirs" not in html
    ours = set(SearchItem.objects.filter(team=tenant.team).values_list("pk", flat=True))
    assert {int(pk) for pk in hit_ids(html)} <= ours
    # Naming their session as a filter finds nothing of theirs: it is not one of ours.
    theirs = Session.objects.get(external_id="theirs")
    response = member.get(SEARCH, {"q": "otter", "session": str(theirs.pk)})
    assert response.status_code == 400
    assert "No session of this team has that id" in response.content.decode()
    assert "secret plan" not in response.content.decode()


def test_the_nav_links_the_page(member: Client, tenant: Tenant) -> None:
    html = member.get(reverse("dashboard:sessions")).content.decode()
    assert f'<a href="{SEARCH}">Search</a>' in html
    assert f'<a href="{SEARCH}" aria-current="page">Search</a>' in page(member)


# --- results ----------------------------------------------------------------------------------------


def test_a_hit_marks_the_matched_words_and_links_the_message(member: Client, tenant: Tenant) -> None:
    session = chat(tenant, "trip-42", "hello", "What is the weather in Oslo tomorrow?")
    run_index(tenant.team.pk)

    html = page(member, q="oslo weather")

    assert "<mark>weather</mark> in <mark>Oslo</mark> tomorrow" in html
    assert f'href="/sessions/{session.pk}/?after=1#m2">message #2</a>' in html
    assert f'in <a class="session-link" href="/sessions/{session.pk}/">trip-42</a>' in html
    assert '<span class="kind-badge kind-message">message</span>' in html
    assert "best match" in html


def test_stored_html_is_escaped_in_the_snippet(member: Client, tenant: Tenant) -> None:
    chat(tenant, "xss", 'otter <script>alert("pwned")</script> <b>bold</b> **not marked by us**')
    run_index(tenant.team.pk)

    html = page(member, q="otter")

    assert "<script>alert" not in html
    assert "<b>bold</b>" not in html
    assert "<mark>otter</mark> &lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt; &lt;b&gt;bold&lt;/b&gt;" in html


@pytest.mark.parametrize(
    ("snippet", "html"),
    [
        ("a **word** b", "a <mark>word</mark> b"),
        ("**<img src=x onerror=alert(1)>**", "<mark>&lt;img src=x onerror=alert(1)&gt;</mark>"),
        ("x & y ** z", "x &amp; y ** z"),
    ],
)
def test_highlight_escapes_before_it_marks(snippet: str, html: str) -> None:
    assert search_pages.highlight(snippet) == html


def test_kind_facets_narrow_the_results_and_link_each_source(member: Client, tenant: Tenant) -> None:
    session = chat(tenant, "release-chat", "the otter release ships on Friday")
    fact, _ = facts.fact_add(
        team=tenant.team, role="ops", subject="otter release", predicate="ships_on", object="friday"
    )
    entry = agent_records.agent_memory_entry_append(
        session=session,
        agent="Coder",
        kind="discovery",
        entry={"type": "code_pattern", "content": "otter uses asyncio"},
    )
    experience = experiences.experience_create(
        team=tenant.team,
        exp_id="otter-releases",
        who=["planner"],
        when="an otter release is planned",
        what="check the changelog first",
        actor="ada",
        status="approved",
    )
    run_index(tenant.team.pk)

    facts_only = page(member, q="otter release", kind="fact")
    assert re.findall(r'class="kind-badge kind-(\w+)"', facts_only) == ["fact"]
    assert f'href="/facts/{fact.pk}/">open fact</a>' in facts_only
    assert 'value="fact" checked' in facts_only

    records = page(member, q="otter asyncio", kind="record")
    url = reverse("dashboard:agent_memory", args=[session.pk, "Coder"])
    assert f'href="{url}#{entry.entry_id}">Coder&#x27;s discovery</a>' in records

    found = page(member, q="otter release planned", kind=["experience", "message"])
    assert set(re.findall(r'class="kind-badge kind-(\w+)"', found)) == {"experience", "message"}
    assert f'href="/experiences/e/{experience.exp_id}/">experience otter-releases</a>' in found


def test_invalidated_facts_show_only_when_asked_and_with_a_badge(member: Client, tenant: Tenant) -> None:
    old, _ = facts.fact_add(team=tenant.team, role="user", subject="Ada", predicate="lives in", object="Paris")
    facts.fact_invalidate(fact=old)
    run_index(tenant.team.pk)

    assert "<mark>Paris</mark>" not in page(member, q="Ada lives Paris")
    assert hit_ids(page(member, q="Ada lives Paris", kind="fact")) == []
    html = page(member, q="Ada lives Paris", include_invalidated="1")
    assert "<mark>Paris</mark>" in html
    assert '<span class="pill invalidated-pill"' in html
    assert 'class="hit kind-fact invalidated"' in html


def test_filters_by_session_external_id_agent_and_time(member: Client, tenant: Tenant) -> None:
    chat(tenant, "first", "otter notes from the first session")
    second = chat(tenant, "second", "otter notes from the second session")
    run_index(tenant.team.pk)

    by_name = page(member, q="otter notes", session="second")
    assert "second session" in by_name and "first session" not in by_name
    by_id = page(member, q="otter notes", session=str(second.pk))
    assert "second session" in by_id and "first session" not in by_id
    assert '<span class="count-badge">on</span>' in by_id  # the filters fold out when one is set

    tomorrow = (timezone.now() + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    assert hit_ids(page(member, q="otter", **{"from": tomorrow})) == []
    assert "Nothing found for <q>otter</q>" in page(member, q="otter", **{"from": tomorrow})


def test_the_score_breakdown_is_there_on_demand(member: Client, tenant: Tenant) -> None:
    chat(tenant, "s", "otter weather report")
    run_index(tenant.team.pk)

    closed = page(member, q="otter")
    assert '<details class="score-details"' in closed and "Words rank" in closed
    assert re.search(r'<details class="score-details" id="score-\d+">', closed)
    opened = page(member, q="otter", explain="1")
    assert re.search(r'<details class="score-details" id="score-\d+" open>', opened)
    assert "Meaning rank" in opened and "Fused score" in opened and "Recency" in opened


def test_items_not_embedded_yet_are_counted(member: Client, tenant: Tenant) -> None:
    session = chat(tenant, "s", "otter one")
    run_index(tenant.team.pk)
    search.index_docs(team_id=tenant.team.pk, docs=[doc("otter two")], wake=False)
    assert session.pk

    html = page(member, q="otter")

    assert "1 item still being indexed" in html


def test_an_empty_visit_shows_what_the_page_does(member: Client, tenant: Tenant) -> None:
    html = page(member)
    assert "Search messages, summaries, facts" in html
    assert "best match" not in html and "field-error" not in html


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"q": "x" * 1001}, "q", "no more than 1000 characters"),
        ({"q": "", "agent": "planner"}, "q", "may not be blank"),
        ({"q": "otter", "kind": "bogus"}, "kind", "not a valid choice"),
        ({"q": "otter", "from": "yesterday"}, "from", "Datetime has wrong format"),
        ({"q": "otter", "from": "2024-05-02T10:00", "to": "2024-05-01T10:00"}, "to", "must not be before from"),
        ({"q": "otter", "session": "nope"}, "session", "No session of this team"),
    ],
)
def test_bad_input_is_shown_next_to_its_field(
    member: Client, tenant: Tenant, params: dict[str, str], field: str, message: str
) -> None:
    response = member.get(SEARCH, params)

    assert response.status_code == 400
    html = response.content.decode()
    assert message in html
    assert response.context["form"].errors.keys() == {field}
    assert "best match" not in html


# --- the session page: what recall injected ----------------------------------------------------------


def test_the_session_page_shows_what_recall_injected_and_why(member: Client, tenant: Tenant) -> None:
    notes = chat(tenant, "notes", "the otter database password rotates monthly")
    fact, _ = facts.fact_add(
        team=tenant.team, role="ops", subject="otter database", predicate="engine", object="postgres"
    )
    session = chat(tenant, "now", "hello")
    run_index(tenant.team.pk)
    url = reverse("dashboard:session", args=[session.pk])
    assert "Recalled memory" not in member.get(url).content.decode()

    response = tenant.client.get(f"/api/v1/sessions/{session.pk}/context/", {"recall": "otter database", "recall_k": 3})
    assert response.status_code == 200, response.content
    recalled = response.json()["recall"]["memories"]
    assert {m["kind"] for m in recalled} >= {"message", "fact"}
    ContextServe.objects.create(
        team=tenant.team, session=session, raw_tokens=1, served_tokens=1
    )  # no recall: not listed

    html = member.get(url).content.decode()

    assert "Recalled memory" in html
    assert "recalled for <q>otter database</q>" in html
    assert f'href="/sessions/{notes.pk}/?after=0#m1">message #1</a>' in html
    assert f'href="/facts/{fact.pk}/">open fact</a>' in html
    assert html.count('class="recall-serve"') == 1
    assert "the otter database password rotates monthly" in html


def test_a_recalled_memory_since_deleted_still_shows_where_it_was(member: Client, tenant: Tenant) -> None:
    session = chat(tenant, "now", "hello")
    gone = str(uuid.uuid4())
    ContextServe.objects.create(
        team=tenant.team,
        session=session,
        raw_tokens=10,
        served_tokens=8,
        recall_query="what about <b>otters</b>",
        recalled=[
            {"kind": "message", "id": gone, "item_id": 999999, "session": str(session.pk), "seq": 1, "score": 0.5},
            {"kind": "fact", "id": gone, "item_id": 999998, "session": None, "seq": None, "score": 0.2},
        ],
    )

    html = member.get(reverse("dashboard:session", args=[session.pk])).content.decode()

    assert "recalled for <q>what about &lt;b&gt;otters&lt;/b&gt;</q>" in html
    assert f'href="/sessions/{session.pk}/?after=0#m1">message #1</a>' in html
    assert f'href="/facts/{gone}/">open fact</a>' in html
    assert html.count("no longer indexed") == 2


# --- the ops page: backlog, failures, the job queue, Reindex -------------------------------------------


def test_the_ops_page_shows_the_backlog_of_the_teams_one_administers(
    client: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    chat(tenant, "a", "otter one", "otter two")
    run_index(tenant.team.pk)
    first = SearchItem.objects.filter(team=tenant.team).order_by("pk").first()
    SearchItem.objects.filter(pk=first.pk).update(state="failed", error="the model refused <this> text")
    search.index_docs(team_id=tenant.team.pk, docs=[doc("otter three")], wake=False)
    chat(other_tenant, "z", "their otter")
    run_index(other_tenant.team.pk)
    SearchItem.objects.filter(team=other_tenant.team).update(state="failed", error="their secret error")
    admin = member_of(client, tenant, admin=True)

    for response in (admin.get(OPS), admin.get(OPS_STATUS)):
        assert response.status_code == 200
        html = response.content.decode()
        backlog = response.context["index_backlog"]
        assert [(t.team_name, t.pending, t.indexed, t.failed) for t in backlog.by_team] == [("alpha", 1, 1, 1)]
        assert 'id="queue-search"' in html and "Search indexing" in html
        assert 'id="search-index"' in html
        assert "the model refused &lt;this&gt; text" in html
        assert "their secret error" not in html and "beta" not in html
        assert f'action="{REINDEX}"' in html


def test_the_index_job_queue_lists_failed_runs_and_retry_queues_a_new_one(
    client: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    failed = IndexRun.objects.create(
        team=tenant.team, status="failed", error="embeddings server: 503", attempts=5, finished_at=timezone.now()
    )
    theirs = IndexRun.objects.create(
        team=other_tenant.team, status="failed", error="theirs", finished_at=timezone.now()
    )
    admin = member_of(client, tenant, admin=True)

    response = admin.get(OPS)
    queue = next(q for q in response.context["queues"] if q.source.kind == "search")
    assert (queue.stats.failed, queue.stats.pending) == (1, 0)
    assert [job.pk for job in queue.failures] == [failed.pk]
    html = response.content.decode()
    assert "embeddings server: 503" in html
    retry = reverse("dashboard:ops_job_retry", args=["search", failed.pk])
    assert f'action="{retry}"' in html

    assert admin.post(reverse("dashboard:ops_job_retry", args=["search", theirs.pk])).status_code == 404
    response = admin.post(retry, follow=True)
    assert "Search indexing: queued a new job for team alpha" in response.content.decode()
    assert IndexRun.objects.filter(team=tenant.team, status="pending").count() == 1
    # The failed run is now followed by a later one of its team: marked retried, no second button.
    html = admin.get(OPS).content.decode()
    assert f'action="{retry}"' not in html and ">retried</span>" in html
    response = admin.post(retry, follow=True)
    assert "team alpha already has a pending job" in response.content.decode()


def test_reindex_is_a_post_for_the_teams_admins_only(client: Client, tenant: Tenant, other_tenant: Tenant) -> None:
    chat(tenant, "a", "otter one")
    run_index(tenant.team.pk)
    facts.fact_add(team=other_tenant.team, role="ops", subject="x", predicate="y", object="z")

    plain = member_of(Client(), tenant)
    assert plain.post(REINDEX, {"team": tenant.team.pk}).status_code == 403
    admin = member_of(client, tenant, admin=True)
    assert admin.get(REINDEX).status_code == 405
    assert admin.post(REINDEX, {"team": other_tenant.team.pk}).status_code == 404
    assert admin.post(REINDEX, {"team": "nope"}).status_code == 404
    assert not IndexRun.objects.filter(trigger="reindex").exists()

    response = admin.post(REINDEX, {"team": tenant.team.pk})

    assert response.status_code == 302
    assert response["Location"] == OPS + "#search-index"
    run = IndexRun.objects.get(team=tenant.team, status="pending")
    assert run.trigger == "reindex"
    assert not IndexRun.objects.filter(team=other_tenant.team, trigger="reindex").exists()
    html = admin.get(OPS).content.decode()
    assert (
        "Search index of alpha: rebuilding (the messages of 1 session to read again). A worker does the rest." in html
    )


def test_a_superuser_may_reindex_any_team(client: Client, tenant: Tenant) -> None:
    client.force_login(get_user_model().objects.create_user("root", is_staff=True, is_superuser=True))
    chat(tenant, "a", "otter one")
    run_index(tenant.team.pk)

    assert client.post(REINDEX, {"team": tenant.team.pk}).status_code == 302
    assert IndexRun.objects.filter(team=tenant.team, status="pending", trigger="reindex").exists()
    assert client.post(REINDEX, {"team": 987654}).status_code == 404


def test_a_curated_experience_is_shown_when_messages_fill_the_top_results(member: Client, tenant: Tenant) -> None:
    # Thirty messages that say "flaky test" outrank one curated experience on words alone.
    chat(tenant, "ci-chat", *(f"the flaky test failed again on run {n}, retrying the flaky test" for n in range(30)))
    experience = experiences.experience_create(
        team=tenant.team,
        exp_id="flaky-tests",
        who=[],
        when="a test fails only sometimes (a flaky test)",
        what="quarantine it and open an issue with the seed",
        actor="ada",
        status="approved",
    )
    run_index(tenant.team.pk)

    html = page(member, q="flaky test")

    main = html[html.index('<p class="search-count') :]
    assert set(re.findall(r'class="kind-badge kind-(\w+)"', main)) == {"message"}  # 20 messages on top
    other = html[html.index('id="other-kinds-heading"') : html.index('<p class="search-count')]
    assert '<h3 class="other-kind">Experiences</h3>' in other
    assert f'href="/experiences/e/{experience.exp_id}/">experience flaky-tests</a>' in other

    # Asked for one kind, the page adds nothing.
    assert 'id="other-kinds-heading"' not in page(member, q="flaky test", kind="message")


def test_a_snippet_of_markdown_reads_as_text_and_marks_only_the_matches(member: Client, tenant: Tenant) -> None:
    chat(
        tenant,
        "ci-report",
        "## CI report\n\nThe **otter** suite `test_login` failed:\n\n| test | status |\n|---|---|\n| login | failed |",
    )
    run_index(tenant.team.pk)

    html = page(member, q="otter failed")

    hit = html[html.index('<li class="hit') :]
    hit = hit[: hit.index("</li>")]
    # The text's own bold is not a match mark, and no Markdown syntax shows: no ##, ** or pipes.
    assert "<mark>otter</mark>" in hit and "<mark>failed</mark>" in hit
    assert "CI report The otter suite test_login" in re.sub(r"</?mark>", "", hit)
    assert not re.search(r"##|\*\*|\||`|---", hit)
