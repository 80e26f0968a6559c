"""The served-context page replays what was sent: the messages as served, the read, the
recalled memories' text, and what the session's next served context added, dropped or changed."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memory_app.conversations import services
from memory_app.conversations.models import Message
from memory_app.models import ContextServe
from tests.memory_app.usage.test_context_replay import read
from tests.memory_app.usage.test_served_contexts import SYSTEM_PROMPT, member, turns  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("job_outbox")


def page_of(client, context_id: str) -> str:
    serve = ContextServe.objects.get(context_id=context_id)
    response = client.get(reverse("dashboard:served_context", args=[serve.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_the_page_shows_the_messages_as_served_and_the_diff_to_the_next(api, member, tenant) -> None:  # noqa: F811
    session = services.session_create(team=tenant.team, system_prompt=SYSTEM_PROMPT)
    services.message_append(session=session, messages=turns(1, 2))
    first = read(api, session, last=3)[0]["context_id"]
    services.message_update(message=Message.objects.get(session=session, seq=4), data={"content": "a fjord cabin"})
    services.message_append(session=session, messages=turns(3, 1))
    second = read(api, session, last=3)[0]["context_id"]

    html = page_of(member, first)

    served = html[html.index('class="ctx-list served-messages"') : html.index("</ol>", html.index("served-messages"))]
    assert served.count('<li class="cmsg') == 4  # the system prompt and seq 2, 3, 4
    assert "answer 2: the hotel by the fjord" in served and "a fjord cabin" not in served  # as it was sent
    assert first in html and "<code>last</code></dt><dd>3</dd>" in html
    assert "2 added, 2 dropped, 1 changed, 1 the same" in html
    assert "<del>answer 2: the hotel by the fjord." in html and "<ins>a fjord cabin</ins>" in html
    assert reverse("dashboard:served_context_by_id", args=[second]) in html
    latest = page_of(member, second)
    assert "None yet: this is the session" in latest and "previous served context" in latest


def test_a_context_id_opens_its_page_and_another_teams_is_a_404(api, member, tenant, other_tenant) -> None:  # noqa: F811
    session = services.session_create(team=tenant.team, system_prompt=SYSTEM_PROMPT)
    mine = read(api, session)[0]["context_id"]
    theirs_session = services.session_create(team=other_tenant.team, system_prompt="theirs")
    theirs = read(other_tenant.client, theirs_session)[0]["context_id"]

    response = member.get(reverse("dashboard:served_context_by_id", args=[mine]))

    assert response.status_code == 302
    assert response["Location"] == reverse(
        "dashboard:served_context", args=[ContextServe.objects.get(context_id=mine).pk]
    )
    assert member.get(reverse("dashboard:served_context_by_id", args=[theirs])).status_code == 404
    other_serve = ContextServe.objects.get(context_id=theirs)
    assert member.get(reverse("dashboard:served_context", args=[other_serve.pk])).status_code == 404


def test_a_context_past_its_retention_shows_its_parts_and_says_the_messages_are_gone(api, member, tenant) -> None:  # noqa: F811
    session = services.session_create(team=tenant.team, system_prompt=SYSTEM_PROMPT)
    context_id = read(api, session)[0]["context_id"]
    ContextServe.objects.get(context_id=context_id).record.delete()

    html = page_of(member, context_id)

    assert "Not kept: served before contexts were recorded, or more than 30 days ago" in html
    assert "Tokens by part" in html
