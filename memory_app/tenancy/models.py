"""Teams (tenants), their members and their API keys."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from memsite.fields import JSONField


class Team(models.Model):
    """A tenant. Every other row belongs to exactly one team."""

    name = models.CharField(max_length=100, unique=True)
    # A partial managed memory config (ManagedMemoryConfig) that new sessions of the team start from.
    memory_config_defaults = JSONField(default=dict, blank=True)
    # LLM tokens (prompt + completion) the team's memory work may spend per UTC day; null uses
    # MEMSITE_DAILY_LLM_TOKEN_BUDGET, 0 means unlimited. Set by admins only (Django admin).
    daily_llm_token_budget = models.PositiveBigIntegerField(null=True, blank=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="TeamMembership", related_name="teams", blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class TeamMembership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    is_admin = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="uniq_team_member")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team}"


class ApiKey(models.Model):
    """A bearer key. Only an HMAC digest is stored; the key itself is shown once."""

    class Role(models.TextChoices):
        READ = "read", "read"
        WRITE = "write", "write"
        ADMIN = "admin", "admin"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.WRITE)
    agent_name = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.team.name})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    # DRF treats request.auth as opaque; these let IsAuthenticated-style checks work.
    @property
    def is_authenticated(self) -> bool:
        return True
