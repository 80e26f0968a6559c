"""Admin for teams, keys and (read-only) conversation data. Writes go through memory_app.conversations.services."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations.models import Message, Session
from memory_app.events.models import MemoryEvent
from memory_app.facts import extraction as fact_extraction
from memory_app.facts import services as facts
from memory_app.facts.models import Fact, FactExtractionRun
from memory_app.tenancy import selectors as tenancy_selectors
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey, Team, TeamMembership
from memory_app.webhooks import services as webhooks
from memory_app.webhooks.models import Webhook, WebhookDelivery
from memsite.errors import Conflict
from memsite.masking import mask_secrets_in


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written only by the services (the API); the admin may look, never touch."""

    # What a worker wrote from an outside answer (an error, a traceback, raw LLM output): shown
    # through mask_secrets, as on every page, since rows stored before masking hold what the worker
    # saw. The admin never saves these rows, so the instance shown can carry the masked text.
    worker_output_fields: tuple[str, ...] = ()

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        obj = super().get_object(request, object_id, from_field)
        for name in self.worker_output_fields if obj is not None else ():
            setattr(obj, name, mask_secrets_in(getattr(obj, name)))
        return obj

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TeamMembershipInline(admin.TabularInline):
    model = TeamMembership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "member_count", "key_count", "created_at"]
    search_fields = ["name"]
    inlines = [TeamMembershipInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Team]:
        return (
            super()
            .get_queryset(request)
            .annotate(member_count=Count("members", distinct=True), key_count=Count("api_keys", distinct=True))
        )

    @admin.display(description="members", ordering="member_count")
    def member_count(self, team: Team) -> int:
        return team.member_count  # type: ignore[attr-defined]

    @admin.display(description="API keys", ordering="key_count")
    def key_count(self, team: Team) -> int:
        return team.key_count  # type: ignore[attr-defined]

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[list[Any], dict[str, int], set, list]:
        """A summary by counts instead of Django's list of every related row (a team can hold
        millions of messages), and no per-model delete permission: the conversation rows
        are read-only here, yet deleting the team through `team_delete` must take them all."""
        teams = list(objs)
        counts = tenancy_selectors.team_row_counts(team_ids=[team.pk for team in teams])
        return [str(team) for team in teams], counts, set(), []

    def log_deletions(self, request: HttpRequest, queryset: Any) -> list[LogEntry]:
        """Logged by `_log_team_deletion` after the delete instead: the default entry would keep
        the team's name, and `team_delete` removes every log line about the team's rows."""
        return []

    def _log_team_deletion(self, request: HttpRequest, team_pk: int) -> None:
        user_id = request.user.pk
        if user_id is None:  # the admin lets only logged-in staff in
            raise PermissionDenied("Only a logged-in admin user can delete a team.")
        LogEntry.objects.create(
            user_id=user_id,
            content_type=ContentType.objects.get_for_model(Team),
            object_id=str(team_pk),
            object_repr=f"team #{team_pk}",
            action_flag=DELETION,
        )

    def delete_model(self, request: HttpRequest, obj: Team) -> None:
        team_pk = obj.pk
        tenancy.team_delete(team=obj)
        self._log_team_deletion(request, team_pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Team]) -> None:
        for team in list(queryset):
            self.delete_model(request, team)

    def save_model(self, request: HttpRequest, obj: Team, form: ModelForm, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        created = tenancy.team_get_or_create(name=obj.name)
        obj.pk, obj.created_at = created.pk, created.created_at
        obj._state.adding = False


@admin.register(TeamMembership)
class TeamMembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "is_admin"]
    list_filter = ["is_admin", "team"]
    search_fields = ["user__username", "user__email", "team__name"]
    autocomplete_fields = ["user", "team"]
    list_select_related = ["user", "team"]


class KeyStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("active", "active"), ("revoked", "revoked")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> QuerySet[ApiKey]:
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys are minted by tenancy.api_key_create; the raw key is shown once, the digest never."""

    list_display = ["prefix", "name", "team", "role", "agent_name", "created_at", "revoked_at", "status"]
    list_filter = [KeyStatusFilter, "role", "team"]
    search_fields = ["prefix", "name", "agent_name", "team__name"]
    list_select_related = ["team"]
    # `digest` is in neither list: it is never rendered, not even read-only.
    fields = ("team", "name", "role", "agent_name")
    actions = ["revoke_selected"]

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> tuple[str, ...]:
        return self.fields if obj is None else ("prefix", *self.fields, "created_at", "revoked_at")

    def has_change_permission(self, request: HttpRequest, obj: ApiKey | None = None) -> bool:
        # No service edits a key: once made it can only be revoked (an action on the list),
        # so a key's own page is view-only.
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: ApiKey | None = None) -> bool:
        return False  # revoke instead: the row stays as the record of the key

    @admin.display(description="status")
    def status(self, api_key: ApiKey) -> str:
        return "active" if api_key.is_active else "revoked"

    def save_model(self, request: HttpRequest, obj: ApiKey, form: ModelForm, change: bool) -> None:
        api_key, raw_key = tenancy.api_key_create(
            team=obj.team, name=obj.name, role=obj.role, agent_name=obj.agent_name
        )
        for model_field in ApiKey._meta.concrete_fields:
            setattr(obj, model_field.attname, getattr(api_key, model_field.attname))
        obj._state.adding = False
        obj._state.db = api_key._state.db
        # Kept on the request only, for response_add; never stored.
        request._memsite_raw_key = raw_key  # type: ignore[attr-defined]

    def response_add(self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None) -> HttpResponse:
        """Show the new key on this response itself, so it is never kept in a cookie or the session."""
        raw_key = getattr(request, "_memsite_raw_key", None)
        if raw_key is None:
            return super().response_add(request, obj, post_url_continue)
        self.message_user(
            request,
            format_html("New API key for team {} (shown once; copy it now): <code>{}</code>", obj.team.name, raw_key),
            messages.WARNING,
        )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "api_key": obj,
            "title": f"API key {obj.prefix}… created",
            "changelist_url": reverse("admin:memory_app_apikey_changelist"),
            "add_url": reverse("admin:memory_app_apikey_add"),
        }
        return TemplateResponse(request, "admin/memory_app/apikey/key_created.html", context)

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        revoked = 0
        for api_key in queryset.filter(revoked_at__isnull=True):
            tenancy.api_key_revoke(api_key=api_key)
            revoked += 1
        self.message_user(request, f"Revoked {revoked} key{'s' if revoked != 1 else ''}.", messages.SUCCESS)


@admin.register(Session)
class SessionAdmin(ReadOnlyAdmin):
    """Read-only: sessions are written through the API's services (token counts, seqs, events).

    Not even deletable here: the confirmation page would list every message of the session.
    """

    list_display = ["__str__", "team", "memory_type", "message_count", "created_at", "updated_at"]
    list_filter = ["memory_type", "created_at", "team"]
    search_fields = ["=id", "external_id", "system_prompt"]
    list_select_related = ["team"]
    date_hierarchy = "created_at"
    # A tuple, so readonly_fields can share it (typed, a list of names would not fit both options).
    fields = (
        "id",
        "team",
        "external_id",
        "memory_type",
        "message_count",
        "links",
        "system_prompt",
        "system_prompt_tokens",
        "metadata",
        "additional_state",
        "last_seq",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Session]:
        return super().get_queryset(request).annotate(message_count=Count("messages"))

    @admin.display(description="messages", ordering="message_count")
    def message_count(self, session: Session) -> int:
        return session.message_count  # type: ignore[attr-defined]

    @admin.display(description="open")
    def links(self, session: Session) -> str:
        return format_html(
            '<a href="{}">timeline in the dashboard</a> · <a href="{}?session__id__exact={}">messages in the admin</a>',
            reverse("dashboard:session", args=[session.pk]),
            reverse("admin:memory_app_message_changelist"),
            session.pk,
        )


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ["session", "seq", "role", "name", "send_from", "send_to", "token_count", "created_at"]
    list_filter = ["role", "session__team"]
    search_fields = ["=session__id", "session__external_id", "name", "tool_call_id", "send_from", "send_to"]
    list_select_related = ["session"]
    ordering = ["-created_at"]
    # Counting every message of a big hub on each changelist page is not worth it.
    show_full_result_count = False


@admin.register(MemoryEvent)
class MemoryEventAdmin(ReadOnlyAdmin):
    worker_output_fields = ("data",)  # a failed job's event quotes its error
    list_display = ["kind", "team", "session", "created_at"]
    list_filter = ["kind", "team"]
    search_fields = ["=session__id", "session__external_id"]
    list_select_related = ["team", "session"]
    show_full_result_count = False


@admin.register(CompactionRun)
class CompactionRunAdmin(ReadOnlyAdmin):
    """The compaction ledger (job rows), read-only; failed runs can be retried through the service."""

    worker_output_fields = ("error", "traceback")
    list_display = [
        "__str__",
        "team",
        "status",
        "trigger",
        "covered",
        "pre_tokens",
        "post_tokens",
        "attempts",
        "created_at",
    ]
    list_filter = ["status", "trigger", "team"]
    search_fields = ["=id", "=session__id", "session__external_id"]
    list_select_related = ["team", "session"]
    date_hierarchy = "created_at"
    show_full_result_count = False
    actions = ["retry_selected"]

    @admin.display(description="covers")
    def covered(self, run: CompactionRun) -> str:
        return f"#{run.covered_from_seq + 1}\N{EN DASH}#{run.covered_to_seq}" if run.covered_to_seq is not None else "-"

    @admin.action(description="Retry selected failed runs (queues a new run per session)")
    def retry_selected(self, request: HttpRequest, queryset: QuerySet[CompactionRun]) -> None:
        queued = skipped = 0
        for run in queryset.select_related("session"):
            try:
                _, created = compaction.compaction_retry(run=run)
            except Conflict:
                skipped += 1
                continue
            queued += created
            skipped += not created
        self.message_user(
            request,
            f"Queued {queued} new run{'s' if queued != 1 else ''}; skipped {skipped} "
            "(not failed, or the session already has a pending or running run).",
            messages.SUCCESS if queued else messages.WARNING,
        )


@admin.register(Fact)
class FactAdmin(ReadOnlyAdmin):
    """Facts, read-only; invalidating and restoring go through the facts services (never a delete)."""

    list_display = ["subject", "predicate", "object", "team", "session", "role", "times_seen", "live", "created_at"]
    list_filter = ["extractor", "team", ("invalidated_at", admin.EmptyFieldListFilter)]
    search_fields = ["=id", "subject_norm", "object_norm", "=session__id"]
    list_select_related = ["team", "session"]
    date_hierarchy = "created_at"
    show_full_result_count = False
    actions = ["invalidate_selected", "restore_selected"]
    exclude = ["subject_key", "object_key", "fact_key"]

    @admin.display(description="live", boolean=True)
    def live(self, fact: Fact) -> bool:
        return fact.invalidated_at is None

    @admin.action(description="Invalidate selected facts")
    def invalidate_selected(self, request: HttpRequest, queryset: QuerySet[Fact]) -> None:
        done = [facts.fact_invalidate(fact=fact) for fact in queryset.filter(invalidated_at__isnull=True)]
        self.message_user(request, f"Invalidated {len(done)} fact(s).", messages.SUCCESS)

    @admin.action(description="Restore selected invalidated facts")
    def restore_selected(self, request: HttpRequest, queryset: QuerySet[Fact]) -> None:
        restored = skipped = 0
        for fact in queryset.filter(invalidated_at__isnull=False):
            try:
                facts.fact_update(fact=fact, data={"invalidated": False})
                restored += 1
            except Conflict:
                skipped += 1
        self.message_user(request, f"Restored {restored} fact(s); skipped {skipped} (an identical fact is live).")


@admin.register(FactExtractionRun)
class FactExtractionRunAdmin(ReadOnlyAdmin):
    """Fact-extraction jobs, read-only; quarantined or failed ones can be retried or discarded."""

    worker_output_fields = ("error", "traceback", "raw_output")
    list_display = ["__str__", "team", "status", "trigger", "range", "facts_added", "attempts", "created_at"]
    list_filter = ["status", "trigger", "team"]
    search_fields = ["=id", "=session__id", "session__external_id"]
    list_select_related = ["team", "session"]
    date_hierarchy = "created_at"
    show_full_result_count = False
    actions = ["retry_selected", "discard_selected"]

    @admin.display(description="input")
    def range(self, run: FactExtractionRun) -> str:
        if run.trigger == FactExtractionRun.Trigger.TEXT:
            return "text"
        return f"#{run.from_seq}\N{EN DASH}#{run.to_seq}" if run.to_seq is not None else "-"

    def _each(self, request: HttpRequest, queryset: QuerySet[FactExtractionRun], action: Any, verb: str) -> None:
        done = skipped = 0
        for run in queryset:
            try:
                action(run=run)
                done += 1
            except Conflict:
                skipped += 1
        self.message_user(request, f"{verb} {done} run(s); skipped {skipped} (not quarantined or failed).")

    @admin.action(description="Retry selected quarantined or failed runs")
    def retry_selected(self, request: HttpRequest, queryset: QuerySet[FactExtractionRun]) -> None:
        self._each(request, queryset, fact_extraction.fact_extraction_retry, "Queued")

    @admin.action(description="Discard selected quarantined or failed runs")
    def discard_selected(self, request: HttpRequest, queryset: QuerySet[FactExtractionRun]) -> None:
        self._each(request, queryset, fact_extraction.fact_extraction_discard, "Discarded")


@admin.register(Webhook)
class WebhookAdmin(ReadOnlyAdmin):
    """Webhooks are made through the API (the secret is handed out once there); `secret` is in
    no field list, so the admin never renders it, only its first characters."""

    list_display = ["url", "team", "active", "secret_hint", "created_by", "created_at"]
    list_filter = ["active", "team"]
    search_fields = ["url", "description", "team__name"]
    list_select_related = ["team"]
    fields = ["id", "team", "url", "description", "event_kinds", "active", "secret_hint", "created_by", "created_at"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    worker_output_fields = ("error", "traceback", "response_body", "payload")
    list_display = ["kind", "webhook", "team", "status", "attempts", "response_code", "created_at"]
    list_filter = ["status", "kind", "team"]
    search_fields = ["=id", "webhook__url"]
    list_select_related = ["team", "webhook"]
    show_full_result_count = False
    actions = ["redeliver_selected"]

    @admin.action(description="Redeliver the selected failed or delivered deliveries")
    def redeliver_selected(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        sent = 0
        for delivery in queryset:
            try:
                webhooks.webhook_redeliver(delivery=delivery)
            except Conflict as exc:
                self.message_user(request, f"{delivery.pk}: {exc.detail}", messages.WARNING)
            else:
                sent += 1
        self.message_user(request, f"{sent} deliver{'y' if sent == 1 else 'ies'} queued again.", messages.SUCCESS)
