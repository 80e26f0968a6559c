"""Agent work records API: documents in JSON or YAML, appends, attempt updates, the context section, prompts.

JSON or YAML is chosen the DRF way: the request's Content-Type picks the parser, and the
Accept header or `?format=json|yaml` picks the renderer (`?format=text` for the prompt texts).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiTypes, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from memory_app.agent_records import documents as agent_memory_yaml
from memory_app.agent_records import selectors as agent_memory_selectors
from memory_app.agent_records import services as agent_memory
from memory_app.agent_records.models import AgentMemory, AgentMemoryEntry
from memory_app.api.base import TeamScopedView, query_params
from memory_app.conversations import selectors
from memory_app.conversations.api import SessionScopedView
from memory_app.conversations.models import Session
from memsite import safe_yaml
from memsite.parsers import JSONParser, check_body


class YAMLRenderer(BaseRenderer):
    media_type = "application/yaml"
    format = "yaml"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return b"" if data is None else agent_memory_yaml.dump(data).encode()


class YAMLParser(BaseParser):
    media_type = "application/yaml"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", "utf-8")
        try:
            document = agent_memory_yaml.load(safe_yaml.read_body(stream).decode(encoding))
        except (agent_memory_yaml.YAMLDocumentError, UnicodeDecodeError) as exc:
            raise ParseError(str(exc)) from exc
        return check_body(document)


class XYAMLParser(YAMLParser):
    media_type = "application/x-yaml"


class TextYAMLParser(YAMLParser):
    media_type = "text/yaml"


class PlainTextRenderer(BaseRenderer):
    """The `text` of a prompt response as text/plain; anything else (an error) as JSON."""

    media_type = "text/plain"
    format = "text"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if isinstance(data, dict) and isinstance(data.get("text"), str):
            return data["text"].encode()
        return JSONRenderer().render(data)


DOCUMENT_RENDERERS = [JSONRenderer, YAMLRenderer]
DOCUMENT_PARSERS = [JSONParser, YAMLParser, XYAMLParser, TextYAMLParser]
TEXT_RENDERERS = [JSONRenderer, PlainTextRenderer]

_DOCUMENT = OpenApiTypes.OBJECT
_DOCUMENT_HELP = (
    'An agent memory document (`version: "1"`, `schema: "agent-memory"`, discoveries, attempts, '
    "decisions, context, history) as JSON or YAML (Content-Type `application/yaml`; Accept or `?format=yaml`)."
)


class AgentScopedView(SessionScopedView):
    renderer_classes = DOCUMENT_RENDERERS
    parser_classes = DOCUMENT_PARSERS

    @property
    def agent(self) -> str:
        return self.kwargs["agent"]

    def get_memory(self, session: Session) -> AgentMemory:
        return agent_memory_selectors.agent_memory_get(session=session, agent=self.agent)


class AgentMemoryView(AgentScopedView):
    @extend_schema(responses=_DOCUMENT, description=_DOCUMENT_HELP)
    def get(self, request: Request, session_id: str, agent: str) -> Response:
        session = self.get_session()
        memory = self.get_memory(session)
        return Response(agent_memory_selectors.agent_memory_document(memory=memory, session=session))

    @extend_schema(
        request=_DOCUMENT,
        responses=_DOCUMENT,
        description="Replace the whole document. Archived entries are kept. " + _DOCUMENT_HELP,
    )
    def put(self, request: Request, session_id: str, agent: str) -> Response:
        session = self.get_session()
        memory = agent_memory.agent_memory_replace(session=session, agent=self.agent, document=request.data)
        return Response(agent_memory_selectors.agent_memory_document(memory=memory, session=session))


class EntryAppendView(AgentScopedView):
    kind: str = ""

    @extend_schema(
        request=_DOCUMENT,
        responses={201: _DOCUMENT},
        description="Append one entry; the server assigns the next id (`discovery-001`, ...) and a "
        "timestamp when the entry has none. An attempt without `result` is `in_progress`.",
    )
    def post(self, request: Request, session_id: str, agent: str) -> Response:
        entry = agent_memory.agent_memory_entry_append(
            session=self.get_session(), agent=self.agent, kind=self.kind, entry=request.data
        )
        return Response(entry.data, status=status.HTTP_201_CREATED)


class AttemptDetailView(AgentScopedView):
    def get_attempt(self, session: Session, attempt_id: str) -> AgentMemoryEntry:
        return agent_memory_selectors.agent_memory_attempt_get(memory=self.get_memory(session), attempt_id=attempt_id)

    @extend_schema(responses=_DOCUMENT, description="One attempt, as written and updated.")
    def get(self, request: Request, session_id: str, agent: str, attempt_id: str) -> Response:
        return Response(self.get_attempt(self.get_session(), attempt_id).data)

    @extend_schema(
        request=_DOCUMENT,
        responses=_DOCUMENT,
        description="Update an attempt in progress (approach, status, progress, subTasks, currentIssue, "
        "nextStep, ...: each field sent replaces the stored one) or conclude it with `result` success, "
        "failure or partial plus output, error, lessons, duration_ms, iterations, tokensUsed. A concluded "
        "attempt answers 409 to any change (record a new attempt); the same concluding update sent again is "
        "accepted.",
    )
    def patch(self, request: Request, session_id: str, agent: str, attempt_id: str) -> Response:
        entry = agent_memory.agent_memory_attempt_update(
            session=self.get_session(), agent=self.agent, attempt_id=attempt_id, changes=request.data
        )
        return Response(entry.data)


def _is_null_value(data: Any, renderer_context: Any) -> bool:
    """A None that is a value to show (the context not written yet), not the empty body of a 204."""
    response = (renderer_context or {}).get("response")
    return data is None and response is not None and response.status_code != status.HTTP_204_NO_CONTENT


class NullJSONRenderer(JSONRenderer):
    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if _is_null_value(data, renderer_context):
            return b"null"
        return super().render(data, accepted_media_type, renderer_context)


class NullYAMLRenderer(YAMLRenderer):
    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if _is_null_value(data, renderer_context):
            return b"null\n"
        return super().render(data, accepted_media_type, renderer_context)


_CONTEXT_HELP = (
    "The document's `context` section alone (currentPlanStep, planStepStatus, filesInScope, "
    "codebaseUnderstanding, taskContext, constraints, openQuestions, nextSteps, blockers, assumptions), "
    "as JSON or YAML; `null` while the agent has written none."
)


_NULLABLE_OBJECT = {"type": "object", "additionalProperties": {}, "nullable": True}


class MemoryContextView(AgentScopedView):
    renderer_classes = [NullJSONRenderer, NullYAMLRenderer]

    @extend_schema(responses={200: _NULLABLE_OBJECT}, description=_CONTEXT_HELP)
    def get(self, request: Request, session_id: str, agent: str) -> Response:
        memory = self.get_memory(self.get_session())
        return Response(agent_memory_selectors.agent_memory_context(memory=memory))

    @extend_schema(
        request=_DOCUMENT,
        responses=_DOCUMENT,
        description="Replace the context section; the entries stay. " + _CONTEXT_HELP,
    )
    def put(self, request: Request, session_id: str, agent: str) -> Response:
        context = agent_memory.agent_memory_context_replace(
            session=self.get_session(), agent=self.agent, context=request.data
        )
        return Response(context)

    @extend_schema(
        request=_DOCUMENT,
        responses=_DOCUMENT,
        description="Each key sent replaces that key of the context (lists and mappings whole); the others "
        "stay. " + _CONTEXT_HELP,
    )
    def patch(self, request: Request, session_id: str, agent: str) -> Response:
        context = agent_memory.agent_memory_context_update(
            session=self.get_session(), agent=self.agent, changes=request.data
        )
        return Response(context)

    @extend_schema(responses={204: None}, description="Clear the context section (the document's `context` is null).")
    def delete(self, request: Request, session_id: str, agent: str) -> Response:
        agent_memory.agent_memory_context_clear(session=self.get_session(), agent=self.agent)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemoryArchiveView(AgentScopedView):
    @extend_schema(responses=_DOCUMENT, description="agent-memory-archive.yaml: the entries the archive job moved.")
    def get(self, request: Request, session_id: str, agent: str) -> Response:
        session = self.get_session()
        memory = self.get_memory(session)
        return Response(agent_memory_selectors.agent_memory_archive_document(memory=memory, session=session))


_TEXT = inline_serializer("PromptText", {"session": serializers.UUIDField(), "text": serializers.CharField()})


class MemoryPromptView(AgentScopedView):
    renderer_classes = TEXT_RENDERERS

    @extend_schema(
        responses=_TEXT,
        description="The agent's memory context (formatMemoryContext): the 5 most recent discoveries, the 3 most "
        "recent failures, the current step and blockers (`?format=text` for text/plain).",
    )
    def get(self, request: Request, session_id: str, agent: str) -> Response:
        session = self.get_session()
        text = agent_memory_selectors.memory_prompt(memory=self.get_memory(session), session=session)
        return Response({"session": str(session.pk), "agent": self.agent, "text": text})


class ArbiterSummaryView(SessionScopedView):
    renderer_classes = TEXT_RENDERERS

    @extend_schema(
        responses=_TEXT,
        description="The arbiter's section of previous agent work (buildArbiterSelectPrompt): each agent's last "
        "attempt (`?format=text` for text/plain).",
    )
    def get(self, request: Request, session_id: str) -> Response:
        session = self.get_session()
        return Response({"session": str(session.pk), "text": agent_memory_selectors.arbiter_summary(session=session)})


class AttemptQuerySerializer(serializers.Serializer):
    result = serializers.ChoiceField(choices=agent_memory.RESULTS, required=False)
    plan_step = serializers.IntegerField(
        required=False, min_value=agent_memory.INTEGER_MIN, max_value=agent_memory.INTEGER_MAX
    )
    session = serializers.UUIDField(required=False)
    agent = serializers.CharField(required=False, max_length=100)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=500, default=100)


class AttemptHitSerializer(serializers.Serializer):
    session = serializers.UUIDField(source="session_id")
    agent = serializers.CharField()
    archived = serializers.BooleanField()
    attempt = serializers.JSONField()


class AttemptListView(TeamScopedView):
    @extend_schema(
        operation_id="attempts_list",
        parameters=[AttemptQuerySerializer],
        responses=inline_serializer("AttemptPage", {"results": AttemptHitSerializer(many=True)}),
        description="Attempts of every agent across the team's sessions (archived ones included), newest "
        "first: `?result=failure&plan_step=2` shows which approaches already failed at step 2.",
    )
    def get(self, request: Request) -> Response:
        query = query_params(AttemptQuerySerializer, request)
        session_id = query.pop("session", None)
        session = selectors.session_get(team=self.team, session_id=session_id) if session_id else None
        hits = agent_memory_selectors.attempt_search(team=self.team, session=session, **query)
        return Response({"results": AttemptHitSerializer(hits, many=True).data})
