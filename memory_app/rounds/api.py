"""Rounds, posts, shared memory, conversation export/import and scratch API:
validate -> call a service or selector -> serialize."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from memory_app.api.base import TeamScopedView, query_params
from memory_app.conversations.api import SessionScopedView
from memory_app.rounds import scratch
from memory_app.rounds import selectors as round_selectors
from memory_app.rounds import serializers as rs
from memory_app.rounds import services as rounds
from memory_app.rounds.models import Post, Round
from memsite.parsers import JSONParser


class RoundScopedView(SessionScopedView):
    def get_round(self) -> Round:
        return round_selectors.round_get(session=self.get_session(), round_id=self.kwargs["round_id"])


_ROUND_PAGE = inline_serializer(
    "RoundPage",
    {"results": rs.RoundOutputSerializer(many=True), "next_after": serializers.IntegerField(allow_null=True)},
)


class RoundListCreateView(SessionScopedView):
    @extend_schema(
        operation_id="sessions_rounds_list",
        parameters=[rs.RoundListQuerySerializer],
        responses=_ROUND_PAGE,
        description="The session's rounds in order, each with its posts and their attachments. With `role`: "
        "TaskWeaver's Memory.get_role_rounds (every round, holding only the posts the role sent or received, "
        "so a round without one has an empty `post_list`; failed rounds left out unless "
        "`include_failure_rounds=true`).",
    )
    def get(self, request: Request, session_id: str) -> Response:
        query = query_params(rs.RoundListQuerySerializer, request)
        include = query.get("include_failure_rounds")
        page = round_selectors.round_page(
            session=self.get_session(),
            role=query.get("role"),
            include_failure_rounds=include if include is not None else "role" not in query,
            after=query.get("after"),
            limit=query["limit"],
        )
        return Response(
            {"results": rs.RoundOutputSerializer(page.rounds, many=True).data, "next_after": page.next_after}
        )

    @extend_schema(
        request=rs.RoundInputSerializer,
        responses={201: rs.RoundOutputSerializer, 200: rs.RoundOutputSerializer},
        description="Start a round (TaskWeaver's create_round). Re-sending a client-chosen `id` with the same "
        "`user_query` returns the stored round with 200.",
    )
    def post(self, request: Request, session_id: str) -> Response:
        session = self.get_session()
        serializer = rs.RoundInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        round_, created = rounds.round_create(
            session=session, user_query=data["user_query"], round_id=data.get("id"), state=data["state"]
        )
        round_selectors.attach_posts([round_], role=None)
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(rs.RoundOutputSerializer(round_).data, status=code)


class RoundDetailView(RoundScopedView):
    @extend_schema(responses=rs.RoundOutputSerializer)
    def get(self, request: Request, session_id: str, round_id: str) -> Response:
        round_ = self.get_round()
        round_selectors.attach_posts([round_], role=None)
        return Response(rs.RoundOutputSerializer(round_).data)

    @extend_schema(
        request=rs.RoundStateSerializer,
        responses=rs.RoundOutputSerializer,
        description="Change the round's state (created, finished, failed).",
    )
    def patch(self, request: Request, session_id: str, round_id: str) -> Response:
        round_ = self.get_round()
        serializer = rs.RoundStateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        round_ = rounds.round_set_state(round_=round_, state=serializer.validated_data["state"])
        round_selectors.attach_posts([round_], role=None)
        return Response(rs.RoundOutputSerializer(round_).data)


class PostCreateView(RoundScopedView):
    @extend_schema(
        request=rs.PostInputSerializer,
        responses={201: rs.PostOutputSerializer, 200: rs.PostOutputSerializer},
        description="Add a post to the round: a message of the session (its seq from the same counter, so "
        "it shows in /context/) with send_from, send_to and typed attachments. A `shared_memory_entry` "
        "attachment also records the entry its `extra` holds. Re-sending the same `message_id` returns "
        "the stored post with 200.",
    )
    def post(self, request: Request, session_id: str, round_id: str) -> Response:
        round_ = self.get_round()
        serializer = rs.PostInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = rounds.post_create(round_=round_, post=serializer.validated_data)
        post = Post(message=result.message, attachments=result.attachments, round_id=round_.round_id)
        code = status.HTTP_200_OK if result.replayed else status.HTTP_201_CREATED
        return Response(rs.PostOutputSerializer(post).data, status=code)


class SharedMemoryView(SessionScopedView):
    @extend_schema(
        operation_id="sessions_shared_memory_list",
        parameters=[rs.SharedMemoryQuerySerializer],
        responses=rs.SharedMemoryOutputSerializer(many=True),
        description="TaskWeaver's Memory.get_shared_memory_entries: conversation-scoped entries from every round, "
        "round-scoped ones from the current (latest) round only; each role's latest entry per type "
        "unless `latest_per_role=false`.",
    )
    def get(self, request: Request, session_id: str) -> Response:
        query = query_params(rs.SharedMemoryQuerySerializer, request)
        entries = round_selectors.shared_memory_entries(
            session=self.get_session(), entry_type=query.get("type"), latest_per_role=query["latest_per_role"]
        )
        return Response(rs.SharedMemoryOutputSerializer(entries, many=True).data)

    @extend_schema(
        request=rs.SharedMemoryInputSerializer,
        responses={201: rs.SharedMemoryOutputSerializer, 200: rs.SharedMemoryOutputSerializer},
    )
    def post(self, request: Request, session_id: str) -> Response:
        session = self.get_session()
        serializer = rs.SharedMemoryInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        round_ = round_selectors.round_get(session=session, round_id=data["round"]) if data.get("round") else None
        entry, created = rounds.shared_memory_entry_create(
            session=session,
            type=data["type"],
            content=data["content"],
            scope=data["scope"],
            round_=round_,
            created_by=data.get("created_by", self.api_key.agent_name or ""),
            entry_id=data.get("id"),
        )
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(rs.SharedMemoryOutputSerializer(entry).data, status=code)


class FormatFirstNegotiation(DefaultContentNegotiation):
    """`?format=` wins over the Accept header: a client that always sends Accept: application/json
    still gets YAML when it asks for it by name."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        wanted = format_suffix or request.query_params.get(self.settings.URL_FORMAT_OVERRIDE)
        for renderer in renderers if wanted else ():
            if renderer.format == wanted:
                return renderer, renderer.media_type
        return super().select_renderer(request, renderers, format_suffix)


class ConversationExportView(SessionScopedView):
    renderer_classes = [JSONRenderer, rs.YAMLRenderer]
    content_negotiation_class = FormatFirstNegotiation

    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=["json", "yaml"])],
        # the same document in either media type (a YAML mapping, not a string)
        responses={(200, "application/json"): dict, (200, "application/yaml"): dict},
        description="The session as TaskWeaver's Conversation.to_dict (id, plugins, enabled, rounds), plus "
        "`session` and, for entries not carried by an attachment, `shared_memory`; `?format=yaml` for YAML.",
    )
    def get(self, request: Request, session_id: str) -> Response:
        return Response(round_selectors.conversation_export(session=self.get_session()))


class ConversationImportView(TeamScopedView):
    parser_classes = [JSONParser, rs.YAMLParser, rs.TextYAMLParser]

    @extend_schema(
        request={"application/json": dict, "application/yaml": str},
        responses={201: rs.ImportResultSerializer},
        description="Create a session from a TaskWeaver conversation dict (Conversation.to_dict), as JSON or YAML "
        "(Content-Type application/yaml; read with yaml.safe_load). Removed or unknown attachment types (e.g. "
        "`init_plan`) are dropped and listed in `warnings`.",
    )
    def post(self, request: Request) -> Response:
        parsed = rounds.conversation_parse(request.data)
        session = rounds.conversation_import(team=self.team, parsed=parsed)
        body: dict[str, Any] = {
            "session_id": str(session.pk),
            "rounds": len(parsed.rounds),
            "posts": sum(len(item["post_list"]) for item in parsed.rounds),
            "warnings": parsed.warnings,
        }
        return Response(body, status=status.HTTP_201_CREATED)


class ScratchView(SessionScopedView):
    @extend_schema(
        operation_id="sessions_scratch_list",
        responses=rs.ScratchOutputSerializer(many=True),
        description="Scratch entries still waiting for the turn's final answer (the next assistant message "
        "without tool calls).",
    )
    def get(self, request: Request, session_id: str) -> Response:
        pending = scratch.scratch_pending(session=self.get_session())
        return Response(rs.ScratchOutputSerializer(pending, many=True).data)

    @extend_schema(
        request=rs.ScratchInputSerializer,
        responses={201: rs.ScratchOutputSerializer},
        description="Record a tool execution of the current turn (scratch memory: action, observation, "
        "duration). The turn's final answer (the next assistant message without tool calls) carries it in "
        "`meta.scratch`.",
    )
    def post(self, request: Request, session_id: str) -> Response:
        session = self.get_session()
        serializer = rs.ScratchInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        (entry,) = scratch.scratch_record(session=session, entries=[serializer.validated_data])
        return Response(rs.ScratchOutputSerializer(entry).data, status=status.HTTP_201_CREATED)
