"""A team with a compacted session (one done compaction by the offline extractive backend) and, in
another team, a failed compaction and a waiting one: what the compaction ledger's and the ops
page's browser tests read. Build it from a fixture that asks for `transactional_db` and
`job_outbox`, before Playwright starts its event loop (the ORM runs in a plain thread)."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.conversations.models import MemoryType
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import TeamMembership
from tests.browser_kit import PASSWORD

TRIP = [
    (
        "Plan a week in Norway in March: Oslo first, then Bergen by train.",
        "Oslo for three nights, then the Bergen line. It is one of the most scenic rail trips in Europe: "
        "seven hours across the Hardangervidda plateau, snow-covered in March. Bergen deserves two nights "
        "at least, and a fjord cruise from there fills the last day nicely.",
    ),
    (
        "Find a hotel in Oslo near the opera house under 180 EUR a night.",
        "Amerikalinjen fits: a five minute walk from the opera, 165 EUR a night in March. The Sommerro is a "
        "good second choice at 175 EUR, with a rooftop bar and a pool, but it is a tram ride from the "
        "waterfront. Both have free cancellation until two days before arrival.",
    ),
    (
        "Book Amerikalinjen for the 3rd to the 6th.",
        "Booked Amerikalinjen, 3 to 6 March, confirmation AMX-4471. Breakfast is included and check-in opens "
        "at 15:00; the room is a superior double on the sixth floor facing the harbour. The confirmation was "
        "sent to the email on file, and the hotel holds the room until midnight on arrival day.",
    ),
    (
        "Now the train to Bergen on the 6th, a window seat please.",
        "Reserved Vy regional train 61, leaving Oslo S at 08:25 on 6 March, car 4 seat 52. It is a window seat "
        "on the left side, which gets the fjord views after Voss. The ticket is a Vy Lowfare at 649 NOK, "
        "changeable for a fee until departure, and it is in the Vy app under the same email.",
    ),
    (
        "What should we pack for Bergen in March?",
        "Layers, a waterproof shell and good shoes: Bergen gets rain on most March days and it stays between "
        "1 and 6 °C.",
    ),
]


def build_compacted_world() -> dict[str, str]:
    """A managed session with one done compaction (offline extractive backend) and a failed one elsewhere."""
    team = tenancy.team_get_or_create(name="demo")
    other = tenancy.team_get_or_create(name="research")
    user = get_user_model().objects.create_user("ada", password=PASSWORD)
    TeamMembership.objects.create(team=team, user=user, is_admin=True)
    session = services.session_create(
        team=team,
        external_id="norway-trip",
        system_prompt="You are a travel planner. Book what the user asks for and keep answers short.",
        memory_type=MemoryType.MANAGED_CONVERSATION,
        memory_config={"threshold_tokens": 1200, "active_context": {"summarization": {"grace_recent_messages": 1}}},
    )
    for question, answer in TRIP[:4]:
        services.message_append(
            session=session,
            messages=[{"role": "user", "content": question}, {"role": "assistant", "content": answer}],
        )
    run, _ = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"
    question, answer = TRIP[4]
    services.message_append(
        session=session, messages=[{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    )
    stuck = services.session_create(team=other, external_id="lit-review-7", memory_type=MemoryType.MANAGED_CONVERSATION)
    for question, answer in TRIP[:2]:  # something to compact when the operator retries
        services.message_append(
            session=stuck, messages=[{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        )
    CompactionRun.objects.create(
        team=other,
        session=stuck,
        trigger="threshold",
        status="failed",
        attempts=4,
        error="gave up after 4 attempts: 429 Too Many Requests (rate limit of the provider reached)",
        finished_at=timezone.now() - timedelta(minutes=12),
    )
    waiting = services.session_create(
        team=other, external_id="lit-review-8", memory_type=MemoryType.MANAGED_CONVERSATION
    )
    for question, answer in TRIP[:2]:
        services.message_append(
            session=waiting, messages=[{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        )
    CompactionRun.objects.filter(pk=compaction.compaction_request(session=waiting, trigger="threshold")[0].pk).update(
        created_at=timezone.now() - timedelta(minutes=3, seconds=20),
        pending_since=timezone.now() - timedelta(minutes=3, seconds=20),
    )
    return {"session_id": str(session.pk), "run_id": str(run.pk), "other_team_id": str(other.pk)}
