"""The webhook's row lock: one change at a time to a webhook's settings and secret."""

from __future__ import annotations

import uuid

from memory_app.webhooks.models import Webhook


def webhook_lock(*, webhook_id: uuid.UUID) -> Webhook:
    """The webhook, row-locked until the transaction ends, read afresh.

    An update and a secret rotation each write the whole row from what they read: the lock
    makes them take turns, so neither puts back what the other just changed (a rotated secret
    in particular). Raises Webhook.DoesNotExist when the webhook is gone.
    """
    return Webhook.objects.select_for_update().get(pk=webhook_id)
