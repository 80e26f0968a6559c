"""End to end in Debian's chromium: from the session page a member opens a served context and
reads what the model saw (messages as served, the summary, recalled memories with their text)
and what the next served context changed, at phone and desktop width.

Run alone with `pytest -m browser`.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import ViewportSize, expect

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.conversations.models import MemoryType, Message
from tests.browser_kit import DESKTOP, PHONE, browser, check_page, member, open_page
from tests.conftest import make_tenant
from tests.memory_app.search.test_indexing import run_index
from tests.memory_app.usage.test_served_contexts import SYSTEM_PROMPT, turns

pytestmark = pytest.mark.browser
WIDTHS = pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["390", "1280"])


@pytest.fixture
def served_world(transactional_db: None, job_outbox: Any) -> dict[str, str]:
    """A compacted session read twice (with recall), an edit and an append between the reads.
    Built before Playwright starts its event loop, so the ORM runs in a plain thread."""
    member("demo")
    tenant = make_tenant("demo")
    earlier = services.session_create(team=tenant.team, system_prompt=SYSTEM_PROMPT)
    services.message_append(
        session=earlier,
        messages=[
            {"role": "user", "content": "which hotel in Bergen had the noisy rooms?"},
            {"role": "assistant", "content": "the harbour hotel in Bergen had noisy rooms facing the fish market"},
        ],
    )
    run_index(tenant.team.pk)
    session = services.session_create(
        team=tenant.team,
        external_id="oslo-trip",
        system_prompt=SYSTEM_PROMPT,
        memory_type=MemoryType.MANAGED_CONVERSATION,
        memory_config={"threshold_tokens": 100_000},
    )
    services.message_append(session=session, messages=turns(1, 4))
    run, _ = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"
    services.message_append(session=session, messages=turns(5, 2))
    url = f"/api/v1/sessions/{session.pk}/context/"
    first = tenant.client.get(url, {"recall": "noisy hotel rooms Bergen"}).json()["context_id"]
    services.message_update(
        message=Message.objects.get(session=session, seq=12), data={"content": "A cabin by the fjord instead."}
    )
    services.message_append(session=session, messages=turns(7, 1))
    tenant.client.get(url)
    return {"session": str(session.pk), "first": first}


@WIDTHS
def test_a_member_replays_a_served_context_from_the_session_page(
    live_server: Any, served_world: dict[str, str], viewport: ViewportSize
) -> None:
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=viewport)
        page.goto(f"{live_server.url}/sessions/{served_world['session']}/#served-contexts")
        rows = page.locator("#served-contexts tbody tr")
        expect(rows).to_have_count(2)
        rows.last.get_by_role("link").click()  # the oldest: newest first

        expect(page.get_by_role("heading", name="Messages as served")).to_be_visible()
        expect(page.locator(".context-id")).to_have_text(served_world["first"])
        messages = page.locator(".served-messages > li")
        expect(messages.first).to_contain_text("system prompt")
        expect(page.locator(".served-messages .cmsg.kind-summary").first).to_be_visible()
        expect(page.locator(".served-messages")).to_contain_text("answer 6: the hotel by the fjord")
        expect(page.locator(".served-messages")).not_to_contain_text("A cabin by the fjord")
        expect(page.locator(".served-recalled")).to_contain_text("noisy rooms facing the fish market")
        # the next read asked for no recall: its memories went; seq 12 was edited; turn 7 came
        expect(page.locator(".diff-counts")).to_have_text("2 added, 1 dropped, 1 changed, 8 the same")
        expect(page.locator(".diff-line.diff-dropped")).to_contain_text("Relevant memory, recalled for")
        expect(page.locator(".diff-line.diff-changed")).to_contain_text("A cabin by the fjord instead.")
        check_page(page, "served-context")

        page.get_by_role("link", name="The session's next served context").click()
        expect(page.locator(".served-messages")).to_contain_text("A cabin by the fjord instead.")
        expect(page.get_by_text("None yet: this is the session's latest served context")).to_be_visible()
        check_page(page, "served-context-latest")
