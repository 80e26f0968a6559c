"""Conversation memory API: validate -> call a service or selector -> serialize."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpResponse, HttpResponseBase
from drf_spectacular.utils import OpenApiExample, OpenApiTypes, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from memory_app.agent_records import selectors as agent_memory_selectors
from memory_app.api.base import TeamScopedView, query_params
from memory_app.compaction import services as compaction
from memory_app.conversations import context, selectors, services
from memory_app.conversations import serializers as s
from memory_app.conversations.models import Session
from memory_app.idempotency.api import KEY_PARAMETER, idempotent_write
from memory_app.search import recall
from memory_app.tenancy.permissions import require_admin
from memory_app.usage import llm_calls as llm_usage
from memory_client.vocabulary.wire import ContextAnswer, ContextRecordBody


class SessionScopedView(TeamScopedView):
    # No docstring on purpose: the OpenAPI schema describes a view without one by the nearest
    # docstring up its classes, TeamScopedView's, and endpoints under a session keep that text.

    def get_session(self) -> Session:
        """The team's session named by the URL's `session_id` (NotFound for another team's)."""
        return selectors.session_get(team=self.team, session_id=self.kwargs["session_id"])


class SessionPagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 500


class SessionListCreateView(TeamScopedView):
    @extend_schema(
        operation_id="sessions_list",
        parameters=[s.SessionListQuerySerializer],
        responses=inline_serializer(
            "SessionPage",
            {
                "count": serializers.IntegerField(),
                "next": serializers.URLField(allow_null=True),
                "previous": serializers.URLField(allow_null=True),
                "results": s.SessionOutputSerializer(many=True),
            },
        ),
    )
    def get(self, request: Request) -> Response:
        sessions = selectors.session_list(team=self.team, **query_params(s.SessionListQuerySerializer, request))
        paginator = SessionPagination()
        page = paginator.paginate_queryset(sessions, request, view=self)
        return paginator.get_paginated_response(s.SessionOutputSerializer(page, many=True).data)

    @extend_schema(
        request=s.SessionInputSerializer,
        responses={201: s.SessionOutputSerializer},
        parameters=[KEY_PARAMETER],
        examples=[
            OpenApiExample(
                "A managed conversation",
                value={
                    "external_id": "ticket-4711",
                    "system_prompt": "You are a careful coding agent.",
                    "memory_type": "managed_conversation",
                    "memory_config": {"threshold_tokens": 64000, "active_context": {"min_reduction_ratio": 0.4}},
                },
                request_only=True,
            )
        ],
    )
    def post(self, request: Request) -> Response:
        serializer = s.SessionInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)

        def create() -> Response:
            session = services.session_create(team=self.team, **serializer.validated_data)
            return Response(s.SessionOutputSerializer(session).data, status=status.HTTP_201_CREATED)

        return idempotent_write(request, team=self.team, write=create, session_of=lambda answer: answer.data["id"])


class SessionDetailView(SessionScopedView):
    @extend_schema(responses=s.SessionOutputSerializer)
    def get(self, request: Request, session_id: str) -> Response:
        return Response(s.SessionOutputSerializer(self.get_session()).data)

    @extend_schema(request=s.SessionInputSerializer, responses=s.SessionOutputSerializer)
    def patch(self, request: Request, session_id: str) -> Response:
        session = self.get_session()
        serializer = s.SessionInputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        session = services.session_update(session=session, data=serializer.validated_data)
        return Response(s.SessionOutputSerializer(session).data)

    @extend_schema(
        responses={204: None},
        description="Delete the session with everything recorded for it (admin key: agents may reset a "
        "session's messages, not purge it).",
    )
    def delete(self, request: Request, session_id: str) -> Response:
        session = self.get_session()
        require_admin(request, "delete sessions")
        services.session_delete(session=session)
        return Response(status=status.HTTP_204_NO_CONTENT)


_MESSAGES_PAGE = inline_serializer(
    "MessagePage",
    {
        "results": s.MessageOutputSerializer(many=True),
        "next_after": serializers.IntegerField(allow_null=True),
    },
)
_APPENDED = inline_serializer("AppendedMessages", {"messages": s.AppendedSerializer(many=True)})


class MessageListCreateView(SessionScopedView):
    @extend_schema(
        operation_id="sessions_messages_list", parameters=[s.MessageListQuerySerializer], responses=_MESSAGES_PAGE
    )
    def get(self, request: Request, session_id: str) -> Response:
        page = selectors.message_page(session=self.get_session(), **query_params(s.MessageListQuerySerializer, request))
        return Response(
            {"results": s.MessageOutputSerializer(page.messages, many=True).data, "next_after": page.next_after}
        )

    @extend_schema(
        request=s.MessageBatchSerializer,
        responses={201: _APPENDED, 200: _APPENDED},
        parameters=[KEY_PARAMETER],
        description="Append one message (the body is the message) or several atomically "
        '(`{"messages": [...]}`). Re-sending messages with the same client-chosen '
        "`message_id`s returns the stored ones with 200.",
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:  # the URL's <uuid:session_id>
        # The session is not read first: the append checks the team as it writes (one
        # statement on PostgreSQL). A bad body still answers 404 for an unknown session.
        try:
            batch, messages = self._validated_messages(request)
        except Exception:
            self.get_session()
            raise

        def append() -> Response:
            result = services.message_append_to(
                team=self.team, session_id=session_id, messages=messages, path="messages" if batch else ""
            )
            body = s.AppendedSerializer(result.messages, many=True).data
            code = status.HTTP_200_OK if result.replayed else status.HTTP_201_CREATED
            return Response({"messages": body} if batch else body[0], status=code)

        return idempotent_write(request, team=self.team, write=append, session_of=lambda _: session_id)

    def _validated_messages(self, request: Request) -> tuple[bool, list[dict[str, Any]]]:
        """(is it a batch, the validated messages) of a one-message or `{"messages": [...]}` body."""
        if isinstance(request.data, dict) and "messages" in request.data:
            batch = s.MessageBatchSerializer(data=request.data)
            batch.is_valid(raise_exception=True)
            return True, batch.validated_data["messages"]
        single = s.MessageInputSerializer(data=request.data)
        single.is_valid(raise_exception=True)
        return False, [single.validated_data]


class MessageDetailView(SessionScopedView):
    def get_message(self) -> Any:
        return selectors.message_get(session=self.get_session(), message_id=self.kwargs["message_id"])

    @extend_schema(responses=s.MessageOutputSerializer)
    def get(self, request: Request, session_id: str, message_id: str) -> Response:
        return Response(s.MessageOutputSerializer(self.get_message()).data)

    @extend_schema(request=s.MessageInputSerializer, responses=s.MessageOutputSerializer)
    def patch(self, request: Request, session_id: str, message_id: str) -> Response:
        message = self.get_message()
        serializer = s.MessageInputSerializer(message, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        data = {k: v for k, v in serializer.validated_data.items() if k != "message_id"}
        message = services.message_update(message=message, data=data)
        return Response(s.MessageOutputSerializer(message).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, session_id: str, message_id: str) -> Response:
        services.message_delete(message=self.get_message())
        return Response(status=status.HTTP_204_NO_CONTENT)


class SessionResetView(SessionScopedView):
    @extend_schema(
        request=None,
        responses=inline_serializer("ResetResult", {"deleted_messages": serializers.IntegerField()}),
    )
    def post(self, request: Request, session_id: str) -> Response:
        deleted = services.session_reset(session=self.get_session())
        return Response({"deleted_messages": deleted})


class ContextView(SessionScopedView):
    @extend_schema(
        parameters=[s.ContextQuerySerializer],
        responses=s.ContextOutputSerializer,
        description="The messages to send to an LLM, in OpenAI's format: the system prompt, then the "
        "most recent messages within `last` (default MEMSITE_CONTEXT_WINDOW) and `max_tokens`. With `recall`, "
        "one 'relevant memory' system message after the system prompt holds the team's memories most relevant "
        "to it, with their sources, inside `max_tokens`; `recall` in the answer lists what it injected. "
        "`context_id` names this answer: GET /contexts/{context_id}/ replays it as it was served.",
    )
    def get(self, request: Request, session_id: str) -> Response:
        query = query_params(s.ContextQuerySerializer, request)
        session = self.get_session()
        wanted = recall.recall_for(
            session=session, query=query.get("recall"), k=query.get("recall_k"), kinds=query.get("recall_kinds")
        )
        served = context.served_context(
            session=session,
            last=query.get("last"),
            max_tokens=query.get("max_tokens"),
            recall=wanted,
            include_failure_rounds=query["include_failure_rounds"],
        )
        injected = served.recall if isinstance(served.recall, recall.Recall) else None
        context_id = llm_usage.context_served_record(
            session=session,
            agent=query.get("agent") or self.api_key.agent_name or session.agent_name,
            served_tokens=served.token_count,
            recall_query=injected.query if injected else "",
            recalled=injected.memories() if injected else [],
            parts=served.breakdown,
            replay=_replay_body(served, query, injected),
            window_kept_out=served.window_left_out,
        )
        compaction.compaction_request_on_read(session=session)
        body: ContextAnswer = {
            "context_id": str(context_id),
            "messages": served.messages,
            "token_count": served.token_count,
        }
        if injected is not None:
            body["recall"] = {
                "query": injected.query,
                "automatic": injected.automatic,
                "memories": injected.memories(),
                "token_count": injected.token_count,
            }
        return Response(body)


SUMMARY_KINDS = ("summary", "instruction")
REPLAYED_TEXT_CHARS = 4000  # of a recalled memory's text in its replay (the served message has its first 400)


def _replay_body(
    served: context.ServedContext, query: dict[str, Any], injected: recall.Recall | None
) -> ContextRecordBody:
    """What the replay record keeps of this answer. The messages are the very objects the answer
    serializes (nothing after this point changes them), so the replay renders the same bytes."""
    run = served.run
    # A compaction's summary is in the context only when its window reaches back to it.
    summarised = any(part.kind in SUMMARY_KINDS for part in served.parts)
    return {
        "params": {
            "last": query.get("last"),
            "max_tokens": query.get("max_tokens"),
            "recall": query.get("recall"),
            "recall_k": query.get("recall_k"),
            "recall_kinds": query.get("recall_kinds"),
        },
        "messages": served.messages,
        "parts": [
            {"kind": part.kind, "seq": part.seq, "token_count": part.token_count, "truncated": part.truncated}
            for part in served.parts
        ],
        "summary": {"run_id": str(run.pk), "covered_to_seq": run.covered_to_seq}
        if run is not None and summarised
        else None,
        "recall": None
        if injected is None
        else {
            "query": injected.query,
            "automatic": injected.automatic,
            "token_count": injected.token_count,
            "memories": [
                {**memory, "text": hit.item.text[:REPLAYED_TEXT_CHARS]}
                for memory, hit in zip(injected.memories(), injected.hits, strict=True)
            ],
        },
    }


class SessionExportView(SessionScopedView):
    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # `?format=rawko` names the zip below, not a renderer; its errors are JSON.
        if request.query_params.get("format") == "rawko":
            return JSONRenderer(), JSONRenderer.media_type
        return super().perform_content_negotiation(request, force)

    @extend_schema(
        responses={(200, "application/json"): s.ImportSerializer, (200, "application/zip"): OpenApiTypes.BINARY},
        description="The session as MemoryManager.save_to_file's JSON document; with `?format=rawko`, a zip of "
        "rawko's session directory (context, conversation, plan, metadata and each agent's memory as YAML).",
    )
    def get(self, request: Request, session_id: str) -> HttpResponseBase:
        session = self.get_session()
        if request.query_params.get("format") == "rawko":
            name, data = agent_memory_selectors.session_directory_zip(session=session)
            response = HttpResponse(data, content_type="application/zip")
            response["Content-Disposition"] = f'attachment; filename="{name}"'
            return response
        return Response(selectors.session_export(session=session))


class SessionImportView(TeamScopedView):
    @extend_schema(request=s.ImportSerializer, responses={201: s.SessionOutputSerializer})
    def post(self, request: Request) -> Response:
        serializer = s.ImportSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        session = services.session_import(
            team=self.team,
            memory_type=data["memory_type"],
            messages=data["messages"],
            additional_state=data.get("additional_state"),
            session_fields=data.get("session", {}),
        )
        return Response(s.SessionOutputSerializer(session).data, status=status.HTTP_201_CREATED)
