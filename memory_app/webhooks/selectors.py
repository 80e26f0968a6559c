"""Reads of the team's webhooks and their delivery log, for the API and the dashboard."""

from __future__ import annotations

import uuid

from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from memory_app.tenancy.models import Team
from memory_app.webhooks.models import Webhook, WebhookDelivery
from memsite.errors import NotFound


def webhook_list(*, team: Team) -> QuerySet[Webhook]:
    return Webhook.objects.filter(team=team).order_by("created_at")


def webhook_get(*, team: Team, webhook_id: uuid.UUID | str) -> Webhook:
    """The team's webhook, or NotFound: another team's id is indistinguishable from none."""
    try:
        return Webhook.objects.get(team=team, pk=webhook_id)
    except (Webhook.DoesNotExist, ValidationError) as exc:
        raise NotFound("Webhook not found.") from exc


# The delivery log's orders, by the name a query string uses; "newest" is the default.
DELIVERY_ORDERS: dict[str, tuple[str, ...]] = {
    "newest": ("-created_at", "-pk"),
    "oldest": ("created_at", "pk"),
    "attempts": ("-attempts", "-created_at", "-pk"),
}


def delivery_list(
    *,
    team: Team,
    webhook: Webhook | None = None,
    status: str | None = None,
    kind: str | None = None,
    order: str = "newest",
) -> QuerySet[WebhookDelivery]:
    """Deliveries newest first (or in another of DELIVERY_ORDERS): the team's, or one webhook's;
    optionally of one status and one event kind."""
    deliveries = WebhookDelivery.objects.filter(team=team).select_related("webhook")
    if webhook is not None:
        deliveries = deliveries.filter(webhook=webhook)
    if status:
        deliveries = deliveries.filter(status=status)
    if kind:
        deliveries = deliveries.filter(kind=kind)
    return deliveries.order_by(*DELIVERY_ORDERS[order])


def delivery_get(*, team: Team, delivery_id: uuid.UUID | str, webhook: Webhook | None = None) -> WebhookDelivery:
    try:
        return delivery_list(team=team, webhook=webhook).get(pk=delivery_id)
    except (WebhookDelivery.DoesNotExist, ValidationError) as exc:
        raise NotFound("Delivery not found.") from exc
