"""Memory files API: the memory tool's six commands, the file list, a file's history, revert.

`POST /memory-files/command/` takes the Anthropic memory tool's parameters as they come from the
model (plus `agent`, the owning agent; omitted = the team's shared files) and answers with the
text the tool hands back. Read keys may `view`; every other command needs a write key.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from memory_app.api.base import TeamScopedView, query_params
from memory_app.memory_files import documents, selectors
from memory_app.memory_files import services as memory_files
from memory_app.memory_files.models import MemoryFile
from memory_app.tenancy.models import ApiKey
from memory_app.tenancy.permissions import HasAnyTeamKey


def _text(**kwargs: Any) -> serializers.CharField:
    # Text the model wrote is kept exactly: no trimming, and "" is a value (an empty file).
    return serializers.CharField(trim_whitespace=False, allow_blank=True, **kwargs)


class AgentField(serializers.CharField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=100, trim_whitespace=False, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        name = super().to_internal_value(data)
        problem = documents.agent_problem(name)
        if problem:
            raise serializers.ValidationError(problem)
        return name


class CommandSerializer(serializers.Serializer):
    command = serializers.ChoiceField(choices=memory_files.COMMANDS)
    path = serializers.CharField(required=False, trim_whitespace=False, max_length=2 * documents.MAX_PATH_CHARS)
    file_text = _text(required=False)
    old_str = _text(required=False)
    new_str = _text(required=False)
    insert_line = serializers.IntegerField(required=False, min_value=-(2**31), max_value=2**31)
    insert_text = _text(required=False)
    view_range = serializers.ListField(
        child=serializers.IntegerField(min_value=-1, max_value=2**31), min_length=2, max_length=2, required=False
    )
    old_path = serializers.CharField(required=False, trim_whitespace=False, max_length=2 * documents.MAX_PATH_CHARS)
    new_path = serializers.CharField(required=False, trim_whitespace=False, max_length=2 * documents.MAX_PATH_CHARS)
    agent = AgentField(required=False, help_text="the owning agent; omitted = the team's shared files")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["command"] != "rename" and "path" not in attrs:
            raise serializers.ValidationError({"path": ["This field is required."]})
        return attrs


class AnswerSerializer(serializers.Serializer):
    command = serializers.CharField()
    path = serializers.CharField()
    output = serializers.CharField(help_text="the text the memory tool returns to the model")
    version = serializers.IntegerField(allow_null=True, help_text="the file's version after the command")


class MemoryFileSerializer(serializers.Serializer):
    path = serializers.CharField()
    agent = serializers.CharField(help_text='the owning agent; "" = shared by the team')
    size = serializers.IntegerField(help_text="bytes of UTF-8")
    version = serializers.IntegerField()
    updated_at = serializers.DateTimeField()
    updated_by = serializers.CharField()


class VersionSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    action = serializers.CharField(help_text="create, edit, rename, delete or revert")
    path = serializers.CharField(help_text="where the file was after this change")
    author = serializers.CharField(help_text="who made the change: the key's agent name, key:<prefix> or a user")
    created_at = serializers.DateTimeField()
    diff = serializers.CharField(help_text="unified diff from the version before")


class ListQuerySerializer(serializers.Serializer):
    prefix = serializers.CharField(required=False, default=documents.ROOT, trim_whitespace=False)
    agent = AgentField(
        required=False, allow_blank=True, help_text="one owner's files (\"\" = shared); omitted = every owner's"
    )


class FileQuerySerializer(serializers.Serializer):
    path = serializers.CharField(trim_whitespace=False, max_length=2 * documents.MAX_PATH_CHARS)
    agent = AgentField(required=False, allow_blank=True)


class RevertSerializer(serializers.Serializer):
    path = serializers.CharField(trim_whitespace=False, max_length=2 * documents.MAX_PATH_CHARS)
    agent = AgentField(required=False, allow_blank=True)
    version = serializers.IntegerField(min_value=1, max_value=2**31 - 1)  # the column's range


def author_of(api_key: ApiKey) -> str:
    return api_key.agent_name or f"key:{api_key.prefix}"


def file_data(file: MemoryFile) -> dict[str, Any]:
    return dict(MemoryFileSerializer(file).data)


class MemoryFilesView(TeamScopedView):
    def owner(self, agent: str) -> memory_files.Owner:
        return memory_files.Owner(team=self.team, agent=agent, author=author_of(self.api_key))


class MemoryFileCommandView(MemoryFilesView):
    # `view` only reads: a read key may send it (the write commands are checked below).
    permission_classes = [HasAnyTeamKey]

    @extend_schema(
        operation_id="memory_files_command",
        request=CommandSerializer,
        responses=AnswerSerializer,
        description="Run one memory-tool command (view, create, str_replace, insert, delete, rename) on the "
        "team's memory files: `agent` picks the owner's tree (omitted: the shared one). 400 for a path the "
        "rules refuse or an old_str not found or not unique, 404 for a missing path, 409 for a create over a "
        "file, 413 past the size limits. /memories/agent-records/<session>/<agent>/agent-memory.yaml shows "
        "each agent record document (view only).",
    )
    def post(self, request: Request) -> Response:
        serializer = CommandSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        if data["command"] not in memory_files.READ_COMMANDS and self.api_key.role == ApiKey.Role.READ:
            raise PermissionDenied("A valid API key with write access is required for this request.")
        agent = data.pop("agent", "")
        command = memory_files.command_from(data, list(memory_files.Command.__annotations__))
        answer = memory_files.memory_file_command(owner=self.owner(agent), command=command)
        return Response(AnswerSerializer(answer).data)


class MemoryFileListView(MemoryFilesView):
    @extend_schema(
        operation_id="memory_files_list",
        parameters=[ListQuerySerializer],
        responses=inline_serializer("MemoryFilePage", {"results": MemoryFileSerializer(many=True)}),
        description="The team's live memory files under `prefix` (default /memories), without their text.",
    )
    def get(self, request: Request) -> Response:
        query = query_params(ListQuerySerializer, request)
        prefix = documents.parse_path(query["prefix"], field="prefix", directory=True)
        files = selectors.memory_file_list(team=self.team, agent=query.get("agent"), prefix=prefix)
        return Response({"results": MemoryFileSerializer(files, many=True).data})


class MemoryFileVersionsView(MemoryFilesView):
    @extend_schema(
        operation_id="memory_files_versions",
        parameters=[FileQuerySerializer],
        responses=inline_serializer(
            "MemoryFileHistory",
            {
                "path": serializers.CharField(),
                "agent": serializers.CharField(),
                "deleted": serializers.BooleanField(),
                "results": VersionSerializer(many=True),
            },
        ),
        description="A file's versions, newest first: who changed it, when, how (the unified diff). A deleted "
        "file's history stays readable by its last path.",
    )
    def get(self, request: Request) -> Response:
        query = query_params(FileQuerySerializer, request)
        path = documents.file_path(query["path"])
        agent = query.get("agent", "")
        file = selectors.memory_file_with_history(team=self.team, agent=agent, path=path.text)
        versions = selectors.memory_file_versions(file=file)
        return Response(
            {
                "path": file.path,
                "agent": file.agent,
                "deleted": file.deleted_at is not None,
                "results": VersionSerializer(versions, many=True).data,
            }
        )


class MemoryFileRevertView(MemoryFilesView):
    @extend_schema(
        operation_id="memory_files_revert",
        request=RevertSerializer,
        responses=MemoryFileSerializer,
        description="Make a new version with the text (and path) of `version`; a deleted file comes back.",
    )
    def post(self, request: Request) -> Response:
        serializer = RevertSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        file = memory_files.memory_file_revert(
            owner=self.owner(data.get("agent", "")), path=data["path"], version=data["version"]
        )
        return Response(file_data(file))
