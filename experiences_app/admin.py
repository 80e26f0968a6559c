"""Admin for experiences: the same validation as the API (yaml_io), writes through experiences_app.services."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from experiences_app import selectors, services
from experiences_app.models import Experience, ExperienceRevision, SelectionLog, TeamExperienceConfig
from experiences_app.selection import validate_template
from experiences_app.yaml_io import ExperienceValidationError, validate_experience
from memory_app.admin import ReadOnlyAdmin


class ExperienceForm(forms.ModelForm):
    who_text = forms.CharField(
        label="who",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One role per line; empty = all.",
    )

    class Meta:
        model = Experience
        fields = ["team", "exp_id", "when", "what", "status"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["who_text"].initial = "\n".join(self.instance.who)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # ModelForm.clean returns cleaned_data (the stub allows an override's None)
        who = [line for line in (data.get("who_text") or "").splitlines() if line.strip()]
        exp_id = self.instance.exp_id if self.instance.pk else data.get("exp_id")
        try:
            clean = validate_experience(exp_id=exp_id, who=who, when=data.get("when"), what=data.get("what"))
        except ExperienceValidationError as exc:
            for name, problems in exc.fields.items():
                self.add_error("who_text" if name == "who" else name, problems)
            return data
        if clean.exp_id.lower() in services.RESERVED_EXP_IDS:
            self.add_error("exp_id", "this id is reserved by the API")
        data.update(who=clean.who, when=clean.when, what=clean.what)
        return data


class RevisionInline(admin.TabularInline):
    model = ExperienceRevision
    fields = ("number", "status", "changed_by", "note", "created_at")  # a tuple, so readonly_fields can share it
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # revisions are written by the services only

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Experience)
class ExperienceAdmin(admin.ModelAdmin):
    form = ExperienceForm
    list_display = ["exp_id", "team", "status", "roles", "revision", "author", "reviewer", "updated_at"]
    list_filter = ["status", "team"]
    search_fields = ["exp_id", "when", "what", "author"]
    readonly_fields = ["author", "reviewer", "reviewed_at", "revision", "created_at", "updated_at"]
    inlines = [RevisionInline]
    actions = ["approve_selected", "disable_selected"]

    def get_readonly_fields(self, request: HttpRequest, obj: Experience | None = None) -> list[str]:
        return [*self.readonly_fields, "team", "exp_id"] if obj else self.readonly_fields

    @admin.display(description="who")
    def roles(self, experience: Experience) -> str:
        return ", ".join(experience.who) or "(all roles)"

    def save_model(self, request: HttpRequest, obj: Experience, form: forms.ModelForm, change: bool) -> None:
        data = form.cleaned_data
        actor = services.actor_label(user=request.user)
        if change:
            fields = {"who": data["who"], "when": data["when"], "what": data["what"], "status": data["status"]}
            saved = services.experience_update(experience=obj, data=fields, actor=actor, note="edited in the admin")
        else:
            saved = services.experience_create(
                team=data["team"],
                exp_id=data["exp_id"],
                who=data["who"],
                when=data["when"],
                what=data["what"],
                status=data["status"],
                actor=actor,
                note="created in the admin",
            )
        obj.pk, obj.revision, obj._state.adding = saved.pk, saved.revision, False

    def delete_model(self, request: HttpRequest, obj: Experience) -> None:
        services.experience_delete(experience=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Experience]) -> None:
        for experience in queryset:
            services.experience_delete(experience=experience)

    def _each(self, request: HttpRequest, queryset: QuerySet[Experience], action: Any, verb: str) -> None:
        actor = services.actor_label(user=request.user)
        for experience in queryset:
            action(experience=experience, actor=actor, note=f"{verb} in the admin")
        self.message_user(request, f"{queryset.count()} experience(s) {verb}.", messages.SUCCESS)

    @admin.action(description="Approve selected experiences")
    def approve_selected(self, request: HttpRequest, queryset: QuerySet[Experience]) -> None:
        self._each(request, queryset, services.experience_approve, "approved")

    @admin.action(description="Disable selected experiences")
    def disable_selected(self, request: HttpRequest, queryset: QuerySet[Experience]) -> None:
        self._each(request, queryset, services.experience_disable, "disabled")


class ConfigForm(forms.ModelForm):
    class Meta:
        model = TeamExperienceConfig
        fields = ["team", "use_experience", "selection_template", "llm_alias"]

    def clean_use_experience(self) -> Any:
        flags = self.cleaned_data.get("use_experience")
        if isinstance(flags, dict):
            conflicts = selectors.switch_conflicts({k.strip(): v for k, v in flags.items() if isinstance(k, str)})
            if conflicts:
                raise forms.ValidationError(conflicts)
        return flags

    def clean_selection_template(self) -> str:
        template = self.cleaned_data.get("selection_template") or ""
        if template.strip():
            try:
                validate_template(template)
            except ValueError as exc:
                raise forms.ValidationError(str(exc)) from exc
        return template


@admin.register(TeamExperienceConfig)
class TeamExperienceConfigAdmin(admin.ModelAdmin):
    form = ConfigForm
    list_display = ["team", "use_experience", "llm_alias", "updated_by", "updated_at"]
    search_fields = ["team__name"]

    def save_model(self, request: HttpRequest, obj: TeamExperienceConfig, form: forms.ModelForm, change: bool) -> None:
        data = {k: form.cleaned_data[k] for k in ("use_experience", "selection_template", "llm_alias")}
        saved = services.experience_config_update(
            team=form.cleaned_data["team"], data=data, actor=services.actor_label(user=request.user)
        )
        obj.pk, obj._state.adding = saved.pk, False


@admin.register(SelectionLog)
class SelectionLogAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "team", "role", "short_query", "selected", "backend", "latency_ms", "error"]
    list_filter = ["role", "backend", "team"]
    search_fields = ["=id", "role", "query", "=session__id"]

    @admin.display(description="query")
    def short_query(self, log: SelectionLog) -> str:
        return log.query[:80]
