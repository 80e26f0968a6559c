"""Serializers of the webhooks API: a webhook in and out (its secret masked but at creation) and
its delivery log."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from memory_app.jobs.serializers import WorkerOutputSerializer
from memory_app.tenancy.models import ApiKey
from memory_app.webhooks.models import WEBHOOK_EVENT_KINDS, Webhook, WebhookDelivery
from memsite.masking import mask_url


class WebhookInputSerializer(serializers.Serializer):
    url = serializers.CharField(max_length=2000)
    description = serializers.CharField(max_length=200, required=False, allow_blank=True)
    event_kinds = serializers.ListField(
        child=serializers.ChoiceField(choices=WEBHOOK_EVENT_KINDS),
        required=False,
        allow_empty=False,
        help_text="Default: every kind webhooks can receive.",
    )
    active = serializers.BooleanField(required=False)


class WebhookOutputSerializer(serializers.ModelSerializer):
    # Typed as any field: WebhookCreatedSerializer declares it again as a CharField.
    secret: serializers.Field = serializers.SerializerMethodField(
        help_text="Masked: the full secret is shown only at creation."
    )

    class Meta:
        model = Webhook
        fields = ["id", "url", "description", "event_kinds", "active", "secret", "created_by", "created_at"]
        read_only_fields = fields

    def get_secret(self, webhook: Webhook) -> str:
        return f"{webhook.secret_hint}…"

    def to_representation(self, instance: Webhook) -> dict[str, Any]:
        # The URL whole for an admin key only: read and write keys are agents', and a receiver's
        # token often travels in the URL's query or user-information. The view passes the request
        # in the context; without one, the URL is masked.
        data = super().to_representation(instance)
        api_key = getattr(self.context.get("request"), "auth", None)
        if not (isinstance(api_key, ApiKey) and api_key.role == ApiKey.Role.ADMIN):
            data["url"] = mask_url(data["url"])
        return data


class WebhookCreatedSerializer(WebhookOutputSerializer):
    secret = serializers.CharField(read_only=True, help_text="The signing secret. Shown this once; store it now.")

    class Meta(WebhookOutputSerializer.Meta):
        pass


class WebhookDeliverySerializer(WorkerOutputSerializer):
    worker_output_fields = ("error", "payload")
    event_id = serializers.IntegerField(read_only=True, allow_null=True)
    redelivery_of = serializers.UUIDField(source="redelivery_of_id", read_only=True, allow_null=True)
    payload = serializers.JSONField(read_only=True)

    class Meta:
        model = WebhookDelivery
        fields = [
            "id",
            "event_id",
            "kind",
            "status",
            "attempts",
            "response_code",
            "error",
            "next_retry_at",
            "delivered_at",
            "redelivery_of",
            "created_at",
            "updated_at",
            "payload",
        ]
        read_only_fields = fields


class DeliveryQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=WebhookDelivery.Status.choices, required=False)
