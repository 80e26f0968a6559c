"""Experiences API: validate -> call a service or selector -> serialize."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from experiences_app import selectors, services
from experiences_app.api import serializers as s
from experiences_app.models import Experience, SelectionLog, TeamExperienceConfig
from experiences_app.yaml_io import uploaded_experience_files, write_zip
from memory_app.api.base import TeamScopedView, query_params
from memory_app.api.schema import page_schema
from memory_app.conversations import selectors as memory_selectors
from memory_app.tenancy.permissions import require_admin
from memory_app.tenancy.throttles import LLMEndpointThrottle
from memsite.errors import InvalidInput
from memsite.parsers import JSONParser


class ExperiencePagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 500


class ExperiencesView(TeamScopedView):
    @property
    def actor(self) -> str:
        return services.actor_label(api_key=self.api_key)

    def get_experience(self) -> Experience:
        return selectors.experience_get(team=self.team, exp_id=self.kwargs["exp_id"])

    def get_log(self) -> SelectionLog:
        return selectors.selection_log_get(team=self.team, log_id=self.kwargs["selection_id"])


class ExperienceListCreateView(ExperiencesView):
    @extend_schema(
        operation_id="experiences_list",
        parameters=[s.ExperienceListQuerySerializer],
        responses=page_schema("ExperiencePage", s.ExperienceOutputSerializer(many=True)),
        description="The team's experiences by exp_id; `role` keeps those whose `who` names the role "
        "(case-insensitive) or is empty, `q` searches exp_id, when and what.",
    )
    def get(self, request: Request) -> Response:
        experiences = selectors.experience_list(
            team=self.team, **query_params(s.ExperienceListQuerySerializer, request)
        )
        paginator = ExperiencePagination()
        page = paginator.paginate_queryset(experiences, request, view=self)
        return paginator.get_paginated_response(s.ExperienceOutputSerializer(page, many=True).data)

    @extend_schema(
        request=s.ExperienceInputSerializer,
        responses={201: s.ExperienceOutputSerializer},
        description="Create a draft experience; an admin key approves it (`.../approve/`) before it can be selected.",
    )
    def post(self, request: Request) -> Response:
        serializer = s.ExperienceInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        experience = services.experience_create(team=self.team, actor=self.actor, **serializer.validated_data)
        return Response(s.ExperienceOutputSerializer(experience).data, status=status.HTTP_201_CREATED)


class ExperienceDetailView(ExperiencesView):
    @extend_schema(responses=s.ExperienceOutputSerializer)
    def get(self, request: Request, exp_id: str) -> Response:
        return Response(s.ExperienceOutputSerializer(self.get_experience()).data)

    @extend_schema(
        request=s.ExperiencePatchSerializer,
        responses=s.ExperienceOutputSerializer,
        description="Edit who/when/what (an approved experience goes back to draft for review) or set "
        "`status` (admin key). Every change is kept as a revision.",
    )
    def patch(self, request: Request, exp_id: str) -> Response:
        experience = self.get_experience()
        serializer = s.ExperiencePatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        note = data.pop("note")
        if "status" in data:
            require_admin(request, "change the status of experiences")
        experience = services.experience_update(experience=experience, data=data, actor=self.actor, note=note)
        return Response(s.ExperienceOutputSerializer(experience).data)

    @extend_schema(responses={204: None}, description="Delete the experience and its revisions (admin key).")
    def delete(self, request: Request, exp_id: str) -> Response:
        experience = self.get_experience()
        require_admin(request, "delete experiences")
        services.experience_delete(experience=experience)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ExperienceRevisionListView(ExperiencesView):
    @extend_schema(operation_id="experiences_revisions_list", responses=s.RevisionSerializer(many=True))
    def get(self, request: Request, exp_id: str) -> Response:
        revisions = selectors.experience_revisions(experience=self.get_experience())[:500]
        return Response(s.RevisionSerializer(revisions, many=True).data)


class ExperienceDiffView(ExperiencesView):
    @extend_schema(
        parameters=[s.DiffQuerySerializer],
        responses=s.DiffOutputSerializer,
        description="A unified diff per field (exp_id, who, when, what, status) from revision `a` to `b`; "
        '"" where the field is the same.',
    )
    def get(self, request: Request, exp_id: str) -> Response:
        experience = self.get_experience()
        query = query_params(s.DiffQuerySerializer, request)
        diff = selectors.experience_revision_diff(experience=experience, a=query["a"], b=query["b"])
        return Response({"a": query["a"], "b": query["b"], "diff": diff})


class ExperienceApproveView(ExperiencesView):
    @extend_schema(request=s.NoteSerializer, responses=s.ExperienceOutputSerializer, description="Admin key.")
    def post(self, request: Request, exp_id: str) -> Response:
        experience = self.get_experience()
        require_admin(request, "approve experiences")
        serializer = s.NoteSerializer(data=request.data or {})
        serializer.is_valid(raise_exception=True)
        experience = services.experience_approve(
            experience=experience, actor=self.actor, note=serializer.validated_data["note"]
        )
        return Response(s.ExperienceOutputSerializer(experience).data)


class ExperienceImportView(ExperiencesView):
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        request={"multipart/form-data": s.ImportInputSerializer},
        responses=s.ImportReportSerializer,
        description="Import `handcrafted_exp_*.yaml` files (`files`, repeated) and/or a zip of them "
        "(`archive`, or any uploaded .zip), deduplicated by exp_id. Bad files are reported under "
        "`rejected` with file and line and do not stop the others. `dry_run=true` writes nothing; "
        "`approve=true` (admin key) approves what the import creates or changes. Without it a changed "
        "approved experience becomes a draft awaiting review while its approved revision stays in "
        "selection: each updated entry says so (`previous_status`, `status`, `awaiting_review`), and "
        "`awaiting_review` lists them.",
    )
    def post(self, request: Request) -> Response:
        serializer = s.ImportInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if data["approve"]:
            require_admin(request, "approve experiences")
        uploads = [*data["files"], *([data["archive"]] if "archive" in data else [])]
        if not uploads:
            raise InvalidInput.for_field("files", "upload handcrafted_exp_*.yaml files or a zip of them")
        files = [item for upload in uploads for item in uploaded_experience_files(upload)]
        report = services.experiences_import(
            team=self.team, files=files, actor=self.actor, dry_run=data["dry_run"], approve=data["approve"]
        )
        return Response(report)


class ExperienceExportView(ExperiencesView):
    @extend_schema(
        parameters=[s.ExportQuerySerializer],
        responses={(200, "application/zip"): OpenApiResponse(description="handcrafted_exp_{exp_id}.yaml files")},
        description="A zip of the team's experiences (or those with `status`) in the experience file format.",
    )
    def get(self, request: Request) -> HttpResponse:
        query = query_params(s.ExportQuerySerializer, request)
        archive = write_zip(services.experiences_export(team=self.team, status=query.get("status")))
        response = HttpResponse(archive, content_type="application/zip")
        response["Content-Disposition"] = 'attachment; filename="experiences.zip"'
        return response


class ExperienceSelectView(ExperiencesView):
    throttle_classes = [LLMEndpointThrottle]

    @extend_schema(
        request=s.SelectInputSerializer,
        responses={
            200: s.SelectOutputSerializer,
            502: OpenApiResponse(description="The LLM refused the request (error: llm_error)."),
            503: OpenApiResponse(description="The LLM is unavailable now (error: llm_unavailable)."),
        },
        description="Experience selection: the approved experiences whose `who` matches `role` are the "
        "candidates, the LLM reads only their `when` texts (with `context`, or the recent messages of "
        "`session_id` for the role) and chooses; `prompt_text` holds the chosen `what` texts to inject. "
        "When the role's use_experience is false, or no experience targets the role, no LLM is asked and "
        "`skipped` says why. Every LLM call is logged (`log_id`, see experience-selections/).",
    )
    def post(self, request: Request) -> Response:
        serializer = s.SelectInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        session_id = data.pop("session_id", None)
        session = memory_selectors.session_get(team=self.team, session_id=session_id) if session_id else None
        result = services.experience_select(team=self.team, session=session, **data)
        return Response(s.SelectOutputSerializer(result).data)


class ExperienceConfigView(ExperiencesView):
    parser_classes = [JSONParser]

    def _body(self, config: TeamExperienceConfig) -> dict[str, Any]:
        return s.ConfigOutputSerializer(config).data

    @extend_schema(responses=s.ConfigOutputSerializer)
    def get(self, request: Request) -> Response:
        return Response(self._body(selectors.experience_config_get(team=self.team)))

    @extend_schema(
        request=s.ConfigInputSerializer,
        responses=s.ConfigOutputSerializer,
        description="The team's experience settings (admin key): `use_experience` per switch or role (unlisted "
        "roles use experiences; `switches` says which role a switch governs, e.g. `code_generator` governs "
        "CodeInterpreter, and both spellings of one switch must agree), "
        '`selection_template` with {experiences}, {user_query}, {context} ("" = the '
        'default; literal braces doubled), `llm_alias` ("" = the configured LLM, "offline" = the '
        "extractive backend). Fields left out keep their value.",
    )
    def put(self, request: Request) -> Response:
        require_admin(request, "change the experience settings")
        serializer = s.ConfigInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        config = services.experience_config_update(team=self.team, data=serializer.validated_data, actor=self.actor)
        return Response(self._body(config))


class SelectionLogListView(ExperiencesView):
    @extend_schema(
        operation_id="experience_selections_list",
        parameters=[s.SelectionLogListQuerySerializer],
        responses=page_schema("SelectionLogPage", s.SelectionLogSerializer(many=True)),
    )
    def get(self, request: Request) -> Response:
        query = query_params(s.SelectionLogListQuerySerializer, request)
        session_id = query.pop("session", None)
        session = memory_selectors.session_get(team=self.team, session_id=session_id) if session_id else None
        logs = selectors.selection_log_list(team=self.team, session=session, **query)
        paginator = ExperiencePagination()
        page = paginator.paginate_queryset(logs, request, view=self)
        return paginator.get_paginated_response(s.SelectionLogSerializer(page, many=True).data)


class SelectionLogDetailView(ExperiencesView):
    @extend_schema(responses=s.SelectionLogSerializer)
    def get(self, request: Request, selection_id: str) -> Response:
        return Response(s.SelectionLogSerializer(self.get_log()).data)


class SelectionLogDownloadView(ExperiencesView):
    @extend_schema(
        responses={(200, "application/json"): OpenApiResponse(description="The prompt messages")},
        description="The selection's prompt log as a file: `{role}_experience_selection_log_{round}_{post}.json`.",
    )
    def get(self, request: Request, selection_id: str) -> HttpResponse:
        log_file = selectors.selection_log_file(log=self.get_log())
        response = HttpResponse(log_file.content, content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="{log_file.name}"'
        return response
