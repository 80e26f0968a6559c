"""The event feed API: the team's MemoryEvents as a list and live as server-sent events."""

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
from rest_framework import serializers
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from memory_app.api.base import TeamScopedView, query_params
from memory_app.conversations import selectors
from memory_app.events import selectors as event_selectors
from memory_app.events import serializers as event_serializers
from memory_app.events import services as events
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
        serializer = event_serializers.LastEventIdSerializer(data={"last_event_id": raw.strip()})
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
            event_serializers.EventStreamQuerySerializer,
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
        query = query_params(event_serializers.EventStreamQuerySerializer, request)
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
