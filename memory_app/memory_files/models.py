"""Memory files: a per-team tree of text files under /memories, for the file-style memory tool.

A file is owned by one agent (`agent`) or shared by the team (`agent` is ""): each owner has a
tree of its own, so two agents may both keep /memories/notes.md. Every change is a
MemoryFileVersion holding the whole text after the change and the unified diff that made it, so
any version can be shown, compared and brought back. A deleted file keeps its row (with
`deleted_at`) and its history, which is how a deletion is reverted; its path is free again.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from memory_app.tenancy.models import Team

# Longest stored path: the path rules (memory_files.documents) keep every path well inside it.
PATH_MAX_CHARS = 1024


class MemoryFile(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memory_files")
    agent = models.CharField(max_length=100, blank=True)  # "" = shared by the team
    path = models.CharField(max_length=PATH_MAX_CHARS)  # "/memories/notes/todo.md"
    content = models.TextField(blank=True, default="")
    size = models.PositiveIntegerField(default=0)  # bytes of `content` as UTF-8
    version = models.PositiveIntegerField(default=1)  # the latest MemoryFileVersion's number
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=200, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # One live file per path in an owner's tree; deleted ones keep their path for history.
            models.UniqueConstraint(
                fields=["team", "agent", "path"], condition=Q(deleted_at__isnull=True), name="uniq_live_memory_file"
            )
        ]
        ordering = ["agent", "path"]

    def __str__(self) -> str:
        return f"{self.agent or 'shared'}:{self.path}"


class MemoryFileVersion(models.Model):
    class Action(models.TextChoices):
        CREATE = "create", "create"
        EDIT = "edit", "edit"
        RENAME = "rename", "rename"
        DELETE = "delete", "delete"
        REVERT = "revert", "revert"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    file = models.ForeignKey(MemoryFile, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    action = models.CharField(max_length=8, choices=Action.choices)
    path = models.CharField(max_length=PATH_MAX_CHARS)  # where the file was after this change
    content = models.TextField(blank=True, default="")  # the whole text after this change
    diff = models.TextField(blank=True, default="")  # unified diff from the version before
    author = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["file", "version"], name="uniq_memory_file_version")]
        ordering = ["file", "-version"]

    def __str__(self) -> str:
        return f"{self.path} v{self.version}"
