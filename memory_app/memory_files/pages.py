"""Dashboard pages of memory files: the team's files (every owner's), and one file with its history.

A member reads a file, sees who changed it and how (each version's diff), edits it and brings an
earlier version back. Team members are writers: the edits go through the services the API uses,
with the member's name as the author.
"""

from __future__ import annotations

from dataclasses import dataclass

from django import forms
from django.contrib import messages as flash
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from memory_app.dashboard.decorators import MAX_DB_INT, non_negative_int, team_page
from memory_app.memory_files import documents, selectors
from memory_app.memory_files import services as memory_files
from memory_app.memory_files.models import MemoryFile, MemoryFileVersion
from memory_app.tenancy.models import Team
from memsite.errors import DomainError

FILES_PER_PAGE = 50
VERSIONS_SHOWN = 50
VERSION_MAX = 2**31 - 1  # the version column's range


class FileFilterForm(forms.Form):
    q = forms.CharField(label="Path contains", required=False, max_length=200)
    owner = forms.CharField(label="Owner", required=False, max_length=100)


class NewFileForm(forms.Form):
    owner = forms.CharField(label="Owner (agent name; empty = shared)", required=False, max_length=100)
    path = forms.CharField(label="Path", max_length=documents.MAX_PATH_CHARS, initial="/memories/", strip=False)
    content = forms.CharField(label="Text", required=False, widget=forms.Textarea(attrs={"rows": 6}), strip=False)


class EditForm(forms.Form):
    content = forms.CharField(label="Text", required=False, widget=forms.Textarea(attrs={"rows": 16}), strip=False)
    version = forms.IntegerField(widget=forms.HiddenInput, min_value=1)


@dataclass(frozen=True)
class DiffLine:
    text: str
    kind: str  # "add", "del", "hunk", "head" or ""


def diff_lines(diff: str) -> list[DiffLine]:
    lines = []
    for line in diff.split("\n") if diff else []:
        if line.startswith(("+++", "---")):
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = ""
        lines.append(DiffLine(line, kind))
    return lines


def _author(request: HttpRequest) -> str:
    return f"user:{request.user.get_username()}"


def _team_file(team: Team, file_id: int) -> MemoryFile:
    # An id past the column's range names nothing (and must not reach the database).
    found = MemoryFile.objects.filter(team=team, pk=file_id).first() if file_id <= MAX_DB_INT else None
    if found is None:
        raise Http404("No such memory file.")
    return found


def _file_url(file: MemoryFile) -> str:
    return reverse("dashboard:memory_file", args=[file.pk])


@team_page
def memory_file_list(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    form = FileFilterForm(request.GET or None)
    files = selectors.memory_file_list(team=team, agent=None, prefix=documents.MemoryPath(documents.ROOT))
    filtered = False
    if form.is_valid():
        if form.cleaned_data["q"]:
            files, filtered = files.filter(path__icontains=form.cleaned_data["q"]), True
        if form.cleaned_data["owner"]:
            owner = form.cleaned_data["owner"]
            files, filtered = files.filter(Q(agent=owner) if owner != "shared" else Q(agent="")), True
    page = Paginator(files.only("pk", "agent", "path", "size", "version", "updated_at", "updated_by"), FILES_PER_PAGE)
    context = {
        "team": team,
        "teams": teams,
        "form": form,
        "filtered": filtered,
        "page": page.get_page(request.GET.get("page")),
        "new_form": NewFileForm(),
        "records_dir": documents.RECORDS_DIR,
    }
    return render(request, "memory_app/memory_files.html", context)


@team_page
@require_POST
def memory_file_new(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    form = NewFileForm(request.POST)
    if form.is_valid():
        owner = memory_files.Owner(team=team, agent=form.cleaned_data["owner"], author=_author(request))
        try:
            problem = documents.agent_problem(owner.agent) if owner.agent else None
            if problem:
                form.add_error("owner", problem)
            else:
                memory_files.memory_file_command(
                    owner=owner,
                    command={
                        "command": "create",
                        "path": form.cleaned_data["path"],
                        "file_text": form.cleaned_data["content"],
                    },
                )
                file = selectors.memory_file_get(team=team, agent=owner.agent, path=form.cleaned_data["path"])
                flash.success(request, f"Created {file.path}.")
                return redirect(_file_url(file))
        except DomainError as exc:
            form.add_error("path" if "path" in exc.fields else None, exc.detail)
    files = selectors.memory_file_list(team=team, agent=None, prefix=documents.MemoryPath(documents.ROOT))
    context = {
        "team": team,
        "teams": teams,
        "form": FileFilterForm(),
        "filtered": False,
        "page": Paginator(files, FILES_PER_PAGE).get_page(1),
        "new_form": form,
        "records_dir": documents.RECORDS_DIR,
    }
    return render(request, "memory_app/memory_files.html", context, status=400)


def _render_file(
    request: HttpRequest, team: Team, teams: list[Team], file: MemoryFile, *, form: EditForm | None, status: int = 200
) -> HttpResponse:
    versions = list(selectors.memory_file_versions(file=file)[:VERSIONS_SHOWN])
    for version in versions:  # any version but the deletion, and not the one the file already is
        version.revertible = version.action != MemoryFileVersion.Action.DELETE and (  # type: ignore[attr-defined]
            version.version != file.version or file.deleted_at is not None
        )
    chosen = non_negative_int(request.GET.get("version"))
    shown: MemoryFileVersion | None = next((v for v in versions if v.version == chosen), None)
    if shown is None and versions:
        shown = versions[0]
    context = {
        "team": team,
        "teams": teams,
        "file": file,
        # The lines as an editor shows them: no empty line after the final newline.
        "lines": documents.split_lines(file.content) if file.deleted_at is None else [],
        "versions": versions,
        "shown": shown,
        "shown_diff": diff_lines(shown.diff) if shown else [],
        "form": form or EditForm(initial={"content": file.content, "version": file.version}),
    }
    return render(request, "memory_app/memory_file.html", context, status=status)


@team_page
def memory_file_detail(request: HttpRequest, file_id: int, *, team: Team, teams: list[Team]) -> HttpResponse:
    return _render_file(request, team, teams, _team_file(team, file_id), form=None)


@team_page
@require_POST
def memory_file_edit(request: HttpRequest, file_id: int, *, team: Team, teams: list[Team]) -> HttpResponse:
    file = _team_file(team, file_id)
    form = EditForm(request.POST)
    if file.deleted_at is not None:
        raise Http404("This file was deleted: revert a version to bring it back.")
    if form.is_valid():
        owner = memory_files.Owner(team=team, agent=file.agent, author=_author(request))
        try:
            memory_files.memory_file_write(
                owner=owner,
                path=file.path,
                content=form.cleaned_data["content"].replace("\r\n", "\n"),
                expected_version=form.cleaned_data["version"],
            )
        except DomainError as exc:
            form.add_error(None, exc.detail)
            return _render_file(request, team, teams, file, form=form, status=409)
        flash.success(request, f"Saved {file.path}.")
        return redirect(_file_url(file))
    return _render_file(request, team, teams, file, form=form, status=400)


@team_page
@require_POST
def memory_file_revert(request: HttpRequest, file_id: int, *, team: Team, teams: list[Team]) -> HttpResponse:
    file = _team_file(team, file_id)
    version = non_negative_int(request.POST.get("version"))
    if version is None or version > VERSION_MAX:
        raise Http404("No such version.")
    owner = memory_files.Owner(team=team, agent=file.agent, author=_author(request))
    try:
        reverted = memory_files.memory_file_revert_file(owner=owner, file=file, version=version)
    except DomainError as exc:
        flash.error(request, exc.detail)
        return redirect(_file_url(file))
    flash.success(
        request, f"{reverted.path} is back to the text of version {version} (now version {reverted.version})."
    )
    return redirect(_file_url(reverted))
