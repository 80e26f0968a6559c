"""Handcrafted experiences, their revisions, the team's selection settings and the selection log."""

from __future__ import annotations

import uuid

from django.db import models

from experiences_app.yaml_io import EXP_ID_MAX_LENGTH
from memory_app.conversations.models import Session
from memory_app.tenancy.models import Team
from memsite.fields import JSONField


class Experience(models.Model):
    """One experience: `who` (roles, empty = all), `when` (shown to the selecting LLM), `what` (injected).

    Only approved experiences are ever candidates for a selection. Written only by
    experiences_app.services, which keeps a revision of every change.
    """

    class Status(models.TextChoices):
        DRAFT = "draft", "draft"
        APPROVED = "approved", "approved"
        DISABLED = "disabled", "disabled"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="experiences")
    exp_id = models.CharField(max_length=EXP_ID_MAX_LENGTH)
    who = JSONField(default=list, blank=True)
    # "|role1|role2|" lowercased ("" = every role): lets the database filter by role on every
    # backend (SQLite has no JSON containment lookup); services keep it in step with `who`.
    roles_key = models.TextField(default="", blank=True, editable=False)
    when = models.TextField()
    what = models.TextField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    author = models.CharField(max_length=200, blank=True)  # "user:<name>" or "key:<label>"
    reviewer = models.CharField(max_length=200, blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    revision = models.PositiveIntegerField(default=0)  # number of the latest ExperienceRevision
    # The approved revision selection serves. An edit to an approved experience makes it a draft
    # again but keeps this, so the experience stays selected with its approved text until the edit
    # is approved (which moves this to the new revision) or it is disabled (which clears it).
    serving_revision = models.ForeignKey(
        "ExperienceRevision", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "exp_id"], name="uniq_experience_per_team")]
        indexes = [models.Index(fields=["team", "status", "exp_id"], name="experience_team_status")]
        ordering = ["exp_id"]

    def __str__(self) -> str:
        return self.exp_id


class ExperienceRevision(models.Model):
    """A snapshot of an experience after one change (creation, edit, approval, disabling ...)."""

    experience = models.ForeignKey(Experience, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    exp_id = models.CharField(max_length=EXP_ID_MAX_LENGTH)
    who = JSONField(default=list, blank=True)
    when = models.TextField()
    what = models.TextField()
    status = models.CharField(max_length=16, choices=Experience.Status.choices)
    changed_by = models.CharField(max_length=200, blank=True)
    note = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["experience", "number"], name="uniq_experience_revision")]
        ordering = ["-number"]

    def __str__(self) -> str:
        return f"{self.exp_id} r{self.number}"


class ExperienceReview(models.Model):
    """A reviewer's decision on one revision: approved, or rejected with a comment for the author.

    A rejected revision leaves the review queue until its author edits it (a new revision)."""

    class Decision(models.TextChoices):
        APPROVED = "approved", "approved"
        REJECTED = "rejected", "rejected"

    experience = models.ForeignKey(Experience, on_delete=models.CASCADE, related_name="reviews")
    revision = models.PositiveIntegerField()  # the ExperienceRevision number decided on
    decision = models.CharField(max_length=16, choices=Decision.choices)
    comment = models.TextField(blank=True)
    reviewer = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["experience", "-created_at"], name="experience_review_latest")]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.experience_id} r{self.revision} {self.decision}"


class TeamExperienceConfig(models.Model):
    """The experience configuration, per team: `<role>.use_experience`, the selection prompt, the LLM alias."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="experience_config")
    # {"planner": true, "code_generator": false}; a role not listed uses experiences (the default).
    use_experience = JSONField(default=dict, blank=True)
    # Replaces the default selection template when not empty (`experience.selection_prompt_path`).
    selection_template = models.TextField(blank=True, default="")
    # `experience.llm_alias`: "" = the configured LLM, "offline" = the extractive backend.
    llm_alias = models.CharField(max_length=50, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=200, blank=True)

    def __str__(self) -> str:
        return f"experience settings of {self.team}"


class SelectionLog(models.Model):
    """One selection: what the LLM was shown, what it answered and what was chosen (the selection's prompt log)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="selection_logs")
    role = models.CharField(max_length=200)
    query = models.TextField()
    context = models.TextField(blank=True)  # the context as sent (bounded)
    candidates = JSONField(default=list, blank=True)  # [{"exp_id", "when"}]
    messages = JSONField(default=list, blank=True)  # the full prompt messages
    raw_response = models.TextField(blank=True)
    selected = JSONField(default=list, blank=True)  # chosen exp_ids, candidate order
    # The team's other experiences, not offered to the LLM, and why: [{"exp_id", "reason"}]
    not_offered = JSONField(default=list, blank=True)
    backend = models.CharField(max_length=50, blank=True)
    model = models.CharField(max_length=200, blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)  # the LLM failure, when there was no answer
    # CASCADE: the log holds the session's text (context, prompt messages), so it goes with it.
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="selection_logs", null=True, blank=True)
    round_id = models.CharField(max_length=200, blank=True)
    post_id = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["team", "-created_at"], name="selection_team_created"),
            models.Index(fields=["team", "role", "-created_at"], name="selection_team_role"),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.role} selection {self.created_at:%Y-%m-%d %H:%M}"
