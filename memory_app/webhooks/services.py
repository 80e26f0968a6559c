"""Webhooks: every write (create/edit/delete, deliveries, redelivery, the sweeper) and the signing.

A delivery is a durable job on the shared lifecycle (memory_app.jobs), like a compaction run:
recorded in the transaction that writes the event, sent to the `deliver_webhook` task on commit,
claimed by a conditional UPDATE, POSTed with no transaction open, and retried with exponential
backoff on network errors, 5xx and 429 until WEBHOOK_MAX_ATTEMPTS; any other answer fails it at
once with the reason kept. The sweeper re-sends deliveries whose broker message was lost and
re-queues ones whose worker died mid-send.

Receivers verify `X-Memsite-Signature: sha256=<hex>`, the HMAC-SHA256 under the webhook's secret
of `"<X-Memsite-Timestamp>.<raw body>"` (see `webhook_signature`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory_app import jobs
from memory_app.events.models import MemoryEvent
from memory_app.events.payload import event_payload
from memory_app.tenancy.models import Team
from memory_app.webhooks.locks import webhook_lock
from memory_app.webhooks.models import WEBHOOK_EVENT_KINDS, Webhook, WebhookDelivery
from memsite.errors import Conflict, InvalidInput
from memsite.masking import mask_secrets
from memsite.url_policy import REASON_UNRESOLVABLE, UnsafeURL, check_outbound_url

Status = WebhookDelivery.Status
SECRET_SCHEME = "whsec"  # noqa: S105  (the prefix of generated secrets, not a secret)
ERROR_LIMIT = 2000
# How much of a receiver's answer the log keeps (its body can be a whole HTML error page).
RESPONSE_BODY_LIMIT = 2000
USER_AGENT = "memsite-webhooks/1"
# A delivery still being tried cannot be sent again: only a finished one.
REDELIVERABLE = (Status.FAILED, Status.DELIVERED)
# The kind of a delivery sent by "Send test": not an event, but the same shape and the same path.
TEST_KIND = "webhook_test"


# --- targets ---------------------------------------------------------------------------------


def webhook_target_problem(url: str, *, resolve: bool) -> str | None:
    """Why `url` is not an acceptable webhook target, or None: memsite.url_policy's rules, with
    private and loopback targets allowed only when MEMSITE_WEBHOOK_ALLOW_PRIVATE_TARGETS is on.

    Checked by `webhook_create` and `webhook_update` (so by the API, the dashboard and anything
    else that writes a webhook) with `resolve=False`: a valid host name that does not resolve yet is
    accepted, anything else the sender would refuse is not. Checked again before every send
    (`resolve=True`: it must resolve), so a name that later points at a refused address is caught.
    """
    try:
        parts = urlsplit(url)
        if parts.username or parts.password:
            return "credentials in the URL are not accepted; use the signing secret"
    except ValueError:
        pass  # reported by the policy below
    try:
        check_outbound_url(url, allow_private=settings.WEBHOOK_ALLOW_PRIVATE_TARGETS)
    except UnsafeURL as exc:
        if exc.reason == REASON_UNRESOLVABLE and not resolve:
            return None
        return exc.fields["url"][0]
    return None


# --- webhooks --------------------------------------------------------------------------------


def _clean_kinds(kinds: Any) -> list[str]:
    if kinds is None:
        return list(WEBHOOK_EVENT_KINDS)
    if not isinstance(kinds, list) or not kinds or not all(isinstance(k, str) for k in kinds):
        raise InvalidInput.for_field("event_kinds", "must be a non-empty list of event kinds")
    unknown = sorted(set(kinds) - set(WEBHOOK_EVENT_KINDS))
    if unknown:
        raise InvalidInput.for_field(
            "event_kinds", f"unknown kind(s) {', '.join(unknown)}; choose from {', '.join(WEBHOOK_EVENT_KINDS)}"
        )
    return [kind for kind in WEBHOOK_EVENT_KINDS if kind in kinds]


def _clean_url(url: Any) -> str:
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput.for_field("url", "is required")
    url = url.strip()
    problem = webhook_target_problem(url, resolve=False)
    if problem:
        raise InvalidInput.for_field("url", problem)
    return url


def generate_secret() -> str:
    return f"{SECRET_SCHEME}_{secrets.token_urlsafe(32)}"


@transaction.atomic
def webhook_create(
    *,
    team: Team,
    url: str,
    actor: str,
    event_kinds: list[str] | None = None,
    description: str = "",
    active: bool = True,
) -> tuple[Webhook, str]:
    """Returns the webhook and its secret: the only time the secret is handed out."""
    secret = generate_secret()
    webhook = Webhook.objects.create(
        team=team,
        url=_clean_url(url),
        description=description[:200],
        secret=secret,
        secret_hint=secret[: len(SECRET_SCHEME) + 5],
        event_kinds=_clean_kinds(event_kinds),
        active=active,
        created_by=actor[:200],
    )
    return webhook, secret


@transaction.atomic
def webhook_update(*, webhook: Webhook, data: Mapping[str, Any]) -> Webhook:
    """Change url, description, event_kinds and/or active (the secret never changes here).

    Takes the webhook's row lock (webhooks.locks).
    """
    webhook = webhook_lock(webhook_id=webhook.pk)
    if "url" in data:
        webhook.url = _clean_url(data["url"])
    if "event_kinds" in data:
        webhook.event_kinds = _clean_kinds(data["event_kinds"])
    if "description" in data:
        webhook.description = str(data["description"])[:200]
    if "active" in data:
        webhook.active = bool(data["active"])
    webhook.save()
    return webhook


@transaction.atomic
def webhook_rotate_secret(*, webhook: Webhook) -> tuple[Webhook, str]:
    """A new signing secret, returned this once like at creation; the old one stops signing at once.

    Takes the webhook's row lock (webhooks.locks).
    """
    webhook = webhook_lock(webhook_id=webhook.pk)
    secret = generate_secret()
    webhook.secret, webhook.secret_hint = secret, secret[: len(SECRET_SCHEME) + 5]
    webhook.save(update_fields=["secret", "secret_hint", "updated_at"])
    return webhook, secret


@transaction.atomic
def webhook_delete(*, webhook: Webhook) -> None:
    """Deletes the webhook and its delivery log; `active=false` is the reversible way."""
    webhook.delete()


# --- deliveries ------------------------------------------------------------------------------


JOB = jobs.JobKind(
    kind="webhooks",
    label="Webhook deliveries",
    model=WebhookDelivery,
    task="memory_app.tasks.deliver_webhook",
    queue_setting="CELERY_TASK_DEFAULT_QUEUE",
    metric_label="webhook_delivery",
    pending=Status.PENDING,
    active=Status.SENDING,
    done=Status.DELIVERED,
    failed=Status.FAILED,
    max_attempts_setting="WEBHOOK_MAX_ATTEMPTS",
    backoff_setting="WEBHOOK_RETRY_BACKOFF",
    resend_after_setting="WEBHOOK_RESEND_AFTER",
    deadline_setting="WEBHOOK_SENDING_DEADLINE",
    queued_field="next_retry_at",  # empty until the first retry: the sweeper falls back to created_at
    claimed_field="claimed_at",
    done_at_field="delivered_at",  # a failure ends at its last write, `touched_field`
    touched_field="updated_at",
    # A duplicate task message must not jump the backoff the receiver asked for.
    claim_when_due=True,
    # A receiver's Retry-After only ever lengthens the wait: it cannot make us retry faster.
    retry_after="at_least",
    retry_label="retry in {delay:.1f}s",
    error_limit=ERROR_LIMIT,
    lost_reason="the worker sending it stopped; out of attempts",
    requeue_reason="the worker sending it stopped",
    # A new delivery of the same payload, pointing back at the failed one.
    retry_service="memory_app.webhooks.services.webhook_job_retry",
    redelivered=True,
    argument_fields=("webhook", "kind", "redelivery_of", "payload"),
    subject_field="kind",
    per_session=False,
    # Not in /metrics' queue gauges: their oldest-pending age reads `queued_field`, which stays
    # empty until a delivery's first retry, so it would not tell how long deliveries wait.
    in_queue_gauges=False,
)


def _send_on_commit(delivery_ids: Iterable[Any]) -> None:
    for delivery_id in delivery_ids:
        jobs.send(JOB, delivery_id, on_commit=True)


def webhook_deliveries_enqueue(*, event: MemoryEvent) -> list[WebhookDelivery]:
    """Record a delivery of `event` for each of its team's active webhooks that subscribe to
    its kind; the tasks are sent when the caller's transaction commits."""
    if event.kind not in WEBHOOK_EVENT_KINDS:
        return []
    # A team has a handful of webhooks: filtering the kinds here works on every database.
    team_hooks = Webhook.objects.filter(team_id=event.team_id, active=True)
    hooks = [hook for hook in team_hooks if event.kind in hook.event_kinds]
    if not hooks:
        return []
    payload = event_payload(event)
    deliveries = WebhookDelivery.objects.bulk_create(
        WebhookDelivery(team_id=event.team_id, webhook=hook, event=event, kind=event.kind, payload=payload)
        for hook in hooks
    )
    _send_on_commit(delivery.pk for delivery in deliveries)
    return deliveries


def webhook_signature(*, secret: str, timestamp: str, body: bytes) -> str:
    """`sha256=<hex>` of HMAC-SHA256(secret, "<timestamp>.<body>")."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def delivery_headers(delivery: WebhookDelivery, *, timestamp: str, signature: str) -> dict[str, str]:
    """The headers a delivery is POSTed with (the dashboard shows them with the signature left out)."""
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Memsite-Event": delivery.kind,
        "X-Memsite-Delivery": str(delivery.pk),
        "X-Memsite-Timestamp": timestamp,
        "X-Memsite-Signature": signature,
    }


class _Outcome:
    """What one POST did: delivered, worth retrying (transient), or not (permanent), and what
    the receiver answered (body excerpt, milliseconds) when it answered."""

    def __init__(
        self,
        *,
        ok: bool,
        transient: bool,
        code: int | None,
        error: str,
        retry_after: float | None,
        body: str = "",
        elapsed_ms: int | None = None,
    ) -> None:
        self.ok, self.transient, self.code, self.error, self.retry_after = ok, transient, code, error, retry_after
        self.body, self.elapsed_ms = body, elapsed_ms


def _retry_after(response: httpx.Response) -> float | None:
    raw = response.headers.get("Retry-After", "")
    return float(raw) if raw.strip().isdigit() else None


def _post(webhook: Webhook, delivery: WebhookDelivery) -> _Outcome:
    problem = webhook_target_problem(webhook.url, resolve=True)
    if problem:
        return _Outcome(ok=False, transient=False, code=None, error=f"target refused: {problem}", retry_after=None)
    body = json.dumps(delivery.payload, separators=(",", ":"), sort_keys=True).encode()
    timestamp = str(int(time.time()))
    signature = webhook_signature(secret=webhook.secret, timestamp=timestamp, body=body)
    headers = delivery_headers(delivery, timestamp=timestamp, signature=signature)
    started = time.monotonic()
    try:
        # No redirects: a 3xx could point the signed request anywhere (the target check would not see it).
        response = httpx.post(
            webhook.url, content=body, headers=headers, timeout=settings.WEBHOOK_TIMEOUT, follow_redirects=False
        )
    except httpx.HTTPError as exc:
        elapsed_ms = int((time.monotonic() - started) * 1000)
        error = f"{type(exc).__name__}: {exc}"
        return _Outcome(ok=False, transient=True, code=None, error=error, retry_after=None, elapsed_ms=elapsed_ms)
    elapsed_ms = int((time.monotonic() - started) * 1000)
    code = response.status_code
    # A receiver can echo what it holds (a secret in its error page): masked before it is cut, over
    # twice the excerpt, so that no secret starting inside the excerpt is cut in two unmasked.
    answer = mask_secrets(response.text[: RESPONSE_BODY_LIMIT * 2])
    excerpt = answer[:RESPONSE_BODY_LIMIT]
    if 200 <= code < 300:
        return _Outcome(
            ok=True, transient=False, code=code, error="", retry_after=None, body=excerpt, elapsed_ms=elapsed_ms
        )
    detail = f"HTTP {code}: {answer[:300]}".strip()
    transient = code >= 500 or code in (408, 429)
    return _Outcome(
        ok=False,
        transient=transient,
        code=code,
        error=detail,
        retry_after=_retry_after(response),
        body=excerpt,
        elapsed_ms=elapsed_ms,
    )


def webhook_deliver(*, delivery_id: str) -> str:
    """The body of the deliver_webhook task: one attempt. Returns a status string for the log."""
    if not jobs.claim(JOB, delivery_id):
        return jobs.ALREADY_CLAIMED
    delivery = WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id)
    webhook = delivery.webhook
    if not webhook.active:
        outcome = _Outcome(ok=False, transient=False, code=None, error="the webhook is inactive", retry_after=None)
    else:
        outcome = _post(webhook, delivery)
    # No retry is due once it ends; a scheduled retry sets next_retry_at over this.
    answer = {
        "response_code": outcome.code,
        "response_body": outcome.body,
        "response_ms": outcome.elapsed_ms,
        "next_retry_at": None,
    }
    if outcome.ok:
        jobs.complete(JOB, delivery, fields={**answer, "error": "", "delivered_at": timezone.now()})
        return "delivered"
    if outcome.transient:
        return jobs.retry_or_fail(JOB, delivery, error=outcome.error, retry_after=outcome.retry_after, fields=answer)
    return jobs.fail(JOB, delivery, reason=outcome.error, fields=answer)


@transaction.atomic
def webhook_redeliver(*, delivery: WebhookDelivery) -> WebhookDelivery:
    """Send a finished delivery's payload again, as a new delivery in the log."""
    current = WebhookDelivery.objects.select_related("webhook").get(pk=delivery.pk)
    if current.status not in REDELIVERABLE:
        raise Conflict(f"Only a failed or delivered delivery can be redelivered (this one is {current.status}).")
    if not current.webhook.active:
        raise Conflict("The webhook is inactive; activate it before redelivering.")
    again = WebhookDelivery.objects.create(
        team_id=current.team_id,
        webhook=current.webhook,
        event_id=current.event_id,
        kind=current.kind,
        payload=current.payload,
        redelivery_of=current,
    )
    _send_on_commit([again.pk])
    return again


def webhook_job_retry(*, job: WebhookDelivery) -> jobs.Retried:
    """The job registry's retry of a delivery (the ops page's button): `webhook_redeliver`."""
    return jobs.Retried(job=webhook_redeliver(delivery=job), created=True)


@transaction.atomic
def webhook_send_test(*, webhook: Webhook, actor: str) -> WebhookDelivery:
    """Queue a delivery of a test payload (an event's shape, kind TEST_KIND) to `webhook`, sent,
    signed, retried and logged exactly like an event's delivery."""
    current = Webhook.objects.get(pk=webhook.pk)
    if not current.active:
        raise Conflict("The webhook is inactive; activate it before sending a test.")
    payload = {
        "id": None,
        "session_id": None,
        "kind": TEST_KIND,
        "data": {"webhook_id": str(current.pk), "sent_by": actor[:200], "message": "A test delivery from memsite."},
        "created_at": timezone.now().isoformat().replace("+00:00", "Z"),
    }
    delivery = WebhookDelivery.objects.create(team_id=current.team_id, webhook=current, kind=TEST_KIND, payload=payload)
    _send_on_commit([delivery.pk])
    return delivery


def webhook_delivery_sweep() -> dict[str, int]:
    """Re-send pending deliveries overdue by WEBHOOK_RESEND_AFTER (lost broker message; the claim
    makes a duplicate harmless) and re-queue or fail ones stuck sending past the deadline."""
    return jobs.sweep(JOB)
