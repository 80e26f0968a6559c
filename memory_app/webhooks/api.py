"""The webhooks API: the team's webhooks (writes need an admin key), their delivery logs and
redelivery: validate -> call a service or selector -> serialize."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response

from memory_app.api.base import TeamScopedView, query_params
from memory_app.api.schema import page_schema
from memory_app.tenancy.permissions import require_admin
from memory_app.webhooks import selectors as webhook_selectors
from memory_app.webhooks import serializers as ws
from memory_app.webhooks import services as webhooks
from memory_app.webhooks.models import Webhook


class DeliveryPagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 500


class WebhookScopedView(TeamScopedView):
    def get_webhook(self) -> Webhook:
        return webhook_selectors.webhook_get(team=self.team, webhook_id=self.kwargs["webhook_id"])


class WebhookListCreateView(TeamScopedView):
    """The team's webhooks; secrets are masked except in the creation answer."""

    @extend_schema(operation_id="webhooks_list", responses=ws.WebhookOutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        hooks = webhook_selectors.webhook_list(team=self.team)
        return Response(ws.WebhookOutputSerializer(hooks, many=True, context={"request": request}).data)

    @extend_schema(
        operation_id="webhooks_create",
        request=ws.WebhookInputSerializer,
        responses={201: ws.WebhookCreatedSerializer},
        description="Admin key. The answer carries the signing `secret` this one time.",
    )
    def post(self, request: Request) -> Response:
        require_admin(request, "manage webhooks")
        serializer = ws.WebhookInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        webhook, secret = webhooks.webhook_create(
            team=self.team, actor=f"key:{self.api_key.prefix}", **serializer.validated_data
        )
        data = ws.WebhookOutputSerializer(webhook, context={"request": request}).data
        data["secret"] = secret
        return Response(data, status=status.HTTP_201_CREATED)


class WebhookDetailView(WebhookScopedView):
    """One of the team's webhooks (writes need an admin key)."""

    @extend_schema(operation_id="webhooks_retrieve", responses=ws.WebhookOutputSerializer)
    def get(self, request: Request, webhook_id: str) -> Response:
        return Response(ws.WebhookOutputSerializer(self.get_webhook(), context={"request": request}).data)

    @extend_schema(
        operation_id="webhooks_partial_update",
        request=ws.WebhookInputSerializer(partial=True),
        responses=ws.WebhookOutputSerializer,
        description="Admin key.",
    )
    def patch(self, request: Request, webhook_id: str) -> Response:
        webhook = self.get_webhook()
        require_admin(request, "manage webhooks")
        serializer = ws.WebhookInputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        webhook = webhooks.webhook_update(webhook=webhook, data=serializer.validated_data)
        return Response(ws.WebhookOutputSerializer(webhook, context={"request": request}).data)

    @extend_schema(operation_id="webhooks_destroy", responses={204: None}, description="Admin key.")
    def delete(self, request: Request, webhook_id: str) -> Response:
        webhook = self.get_webhook()
        require_admin(request, "manage webhooks")
        webhooks.webhook_delete(webhook=webhook)
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookDeliveryListView(WebhookScopedView):
    """A webhook's delivery log, newest first."""

    @extend_schema(
        operation_id="webhooks_deliveries_list",
        parameters=[ws.DeliveryQuerySerializer],
        responses=page_schema("WebhookDeliveryPage", ws.WebhookDeliverySerializer(many=True)),
    )
    def get(self, request: Request, webhook_id: str) -> Response:
        query = query_params(ws.DeliveryQuerySerializer, request)
        deliveries = webhook_selectors.delivery_list(
            team=self.team, webhook=self.get_webhook(), status=query.get("status")
        )
        paginator = DeliveryPagination()
        page = paginator.paginate_queryset(deliveries, request, view=self)
        return paginator.get_paginated_response(ws.WebhookDeliverySerializer(page, many=True).data)


class WebhookRedeliverView(WebhookScopedView):
    """Send a finished delivery again."""

    @extend_schema(
        operation_id="webhooks_deliveries_redeliver",
        request=None,
        responses={202: ws.WebhookDeliverySerializer},
        description="Admin key. Sends a failed or delivered delivery's payload again as a new delivery.",
    )
    def post(self, request: Request, webhook_id: str, delivery_id: str) -> Response:
        delivery = webhook_selectors.delivery_get(team=self.team, webhook=self.get_webhook(), delivery_id=delivery_id)
        require_admin(request, "redeliver webhooks")
        again = webhooks.webhook_redeliver(delivery=delivery)
        return Response(ws.WebhookDeliverySerializer(again).data, status=status.HTTP_202_ACCEPTED)
