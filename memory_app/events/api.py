"""The live event feed (server-sent events) and webhooks API."""

from __future__ import annotations

from collections.abc import Iterable

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from memory_app.api.base import TeamScopedView, query_params
from memory_app.api.schema import page_schema
from memory_app.conversations import selectors
from memory_app.events import selectors as event_selectors
from memory_app.events import serializers as event_serializers
from memory_app.events import serializers as ls
from memory_app.events import services as events
from memory_app.tenancy.permissions import require_admin
from memory_app.webhooks import selectors as webhook_selectors
from memory_app.webhooks import services as webhooks
from memory_app.webhooks.models import Webhook
from memsite.errors import InvalidInput


class JSONErrorsNegotiation(BaseContentNegotiation):
    """The stream answers text/event-stream itself (a StreamingHttpResponse, never rendered);
    whatever comes back rendered is an error, and errors are JSON whatever Accept asks for,
    so `Accept: text/event-stream` never gets a 406."""

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        return next(iter(parsers), None)

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))
        return renderer, renderer.media_type


def _resume_point(request: Request, after: int | None) -> int:
    raw = request.headers.get("Last-Event-ID")
    if raw is not None and raw.strip():
        serializer = ls.LastEventIdSerializer(data={"last_event_id": raw.strip()})
        if not serializer.is_valid():
            raise InvalidInput.for_field("Last-Event-ID", "must be the id of an event (a non-negative integer)")
        return serializer.validated_data["last_event_id"]
    return after if after is not None else events.latest_event_id()


class EventStreamView(TeamScopedView):
    """The team's MemoryEvents as server-sent events, live, resumable with Last-Event-ID."""

    content_negotiation_class = JSONErrorsNegotiation

    @extend_schema(
        operation_id="events_stream",
        parameters=[
            ls.EventStreamQuerySerializer,
            OpenApiParameter(
                "Last-Event-ID",
                OpenApiTypes.INT,
                OpenApiParameter.HEADER,
                description="Resume after this event id (sent by EventSource when it reconnects).",
            ),
        ],
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                # One server-sent event (the schema tools validate each event against it).
                {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": "the event id"},
                        "event": {"type": "string", "description": "the event's kind"},
                        "data": {"type": "string", "contentMediaType": "application/json"},
                    },
                },
                description="Server-sent events: `id:` the event id, `event:` its kind, `data:` the event as JSON "
                "(the events list's shape); `: heartbeat` comments in between. The stream ends after "
                "MEMSITE_SSE_MAX_SECONDS; reconnect with Last-Event-ID.",
            ),
            429: OpenApiResponse(
                description="This key holds MEMSITE_SSE_MAX_STREAMS_PER_KEY streams already (Retry-After says when "
                "to try again)."
            ),
            503: OpenApiResponse(
                description="The deployment serves MEMSITE_SSE_MAX_STREAMS streams already (Retry-After)."
            ),
        },
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        query = query_params(ls.EventStreamQuerySerializer, request)
        session = selectors.session_get(team=self.team, session_id=query["session"]) if "session" in query else None
        cursor = events.EventCursor(
            team=self.team, session=session, position=_resume_point(request, query.get("after"))
        )
        lease = events.stream_lease_open(api_key=self.api_key)
        response = StreamingHttpResponse(
            events.LeasedEventStream(cursor=cursor, lease=lease), content_type="text/event-stream"
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # nginx would otherwise hold events back in its buffer
        return response


class DeliveryPagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 500


class WebhookScopedView(TeamScopedView):
    def get_webhook(self) -> Webhook:
        return webhook_selectors.webhook_get(team=self.team, webhook_id=self.kwargs["webhook_id"])


class WebhookListCreateView(TeamScopedView):
    """The team's webhooks; secrets are masked except in the creation answer."""

    @extend_schema(operation_id="webhooks_list", responses=ls.WebhookOutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        hooks = webhook_selectors.webhook_list(team=self.team)
        return Response(ls.WebhookOutputSerializer(hooks, many=True, context={"request": request}).data)

    @extend_schema(
        operation_id="webhooks_create",
        request=ls.WebhookInputSerializer,
        responses={201: ls.WebhookCreatedSerializer},
        description="Admin key. The answer carries the signing `secret` this one time.",
    )
    def post(self, request: Request) -> Response:
        require_admin(request, "manage webhooks")
        serializer = ls.WebhookInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        webhook, secret = webhooks.webhook_create(
            team=self.team, actor=f"key:{self.api_key.prefix}", **serializer.validated_data
        )
        data = ls.WebhookOutputSerializer(webhook, context={"request": request}).data
        data["secret"] = secret
        return Response(data, status=status.HTTP_201_CREATED)


class WebhookDetailView(WebhookScopedView):
    """One of the team's webhooks (writes need an admin key)."""

    @extend_schema(operation_id="webhooks_retrieve", responses=ls.WebhookOutputSerializer)
    def get(self, request: Request, webhook_id: str) -> Response:
        return Response(ls.WebhookOutputSerializer(self.get_webhook(), context={"request": request}).data)

    @extend_schema(
        operation_id="webhooks_partial_update",
        request=ls.WebhookInputSerializer(partial=True),
        responses=ls.WebhookOutputSerializer,
        description="Admin key.",
    )
    def patch(self, request: Request, webhook_id: str) -> Response:
        webhook = self.get_webhook()
        require_admin(request, "manage webhooks")
        serializer = ls.WebhookInputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        webhook = webhooks.webhook_update(webhook=webhook, data=serializer.validated_data)
        return Response(ls.WebhookOutputSerializer(webhook, context={"request": request}).data)

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
        parameters=[ls.DeliveryQuerySerializer],
        responses=page_schema("WebhookDeliveryPage", ls.WebhookDeliverySerializer(many=True)),
    )
    def get(self, request: Request, webhook_id: str) -> Response:
        query = query_params(ls.DeliveryQuerySerializer, request)
        deliveries = webhook_selectors.delivery_list(
            team=self.team, webhook=self.get_webhook(), status=query.get("status")
        )
        paginator = DeliveryPagination()
        page = paginator.paginate_queryset(deliveries, request, view=self)
        return paginator.get_paginated_response(ls.WebhookDeliverySerializer(page, many=True).data)


class WebhookRedeliverView(WebhookScopedView):
    """Send a finished delivery again."""

    @extend_schema(
        operation_id="webhooks_deliveries_redeliver",
        request=None,
        responses={202: ls.WebhookDeliverySerializer},
        description="Admin key. Sends a failed or delivered delivery's payload again as a new delivery.",
    )
    def post(self, request: Request, webhook_id: str, delivery_id: str) -> Response:
        delivery = webhook_selectors.delivery_get(team=self.team, webhook=self.get_webhook(), delivery_id=delivery_id)
        require_admin(request, "redeliver webhooks")
        again = webhooks.webhook_redeliver(delivery=delivery)
        return Response(ls.WebhookDeliverySerializer(again).data, status=status.HTTP_202_ACCEPTED)


class EventListView(TeamScopedView):
    @extend_schema(
        operation_id="events_list",
        parameters=[event_serializers.EventQuerySerializer],
        responses=inline_serializer(
            "EventPage",
            {
                "results": event_serializers.MemoryEventSerializer(many=True),
                "next_after": serializers.IntegerField(allow_null=True),
            },
        ),
    )
    def get(self, request: Request) -> Response:
        query = query_params(event_serializers.EventQuerySerializer, request)
        session = selectors.session_get(team=self.team, session_id=query["session"]) if "session" in query else None
        events = event_selectors.event_page(
            team=self.team, session=session, after=query.get("after"), limit=query["limit"]
        )
        return Response(
            {
                "results": event_serializers.MemoryEventSerializer(events, many=True).data,
                "next_after": events[-1].pk if len(events) == query["limit"] else None,
            }
        )
