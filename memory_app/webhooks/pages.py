"""Dashboard pages of the team's webhooks: the list with the delivery log, one webhook (its settings,
secret, test and deletion), one delivery (payload, headers, answer).

Reading is for every member; every write is a team admin's POST (the API asks an admin key for the
same) and calls the services the API and the worker use, so a test sent here takes the real path.
Members who are not admins see each webhook's URL masked (`webhook_url` in templatetags/masking.py),
as read and write keys do in the API: a receiver's token often travels in it.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages as flash
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from memory_app.dashboard.decorators import get_or_404, redirect_back, team_admin_action, team_page
from memory_app.events.models import MemoryEvent
from memory_app.tenancy import selectors as tenancy_selectors
from memory_app.tenancy.models import Team
from memory_app.webhooks import selectors as webhook_selectors
from memory_app.webhooks import services as webhooks
from memory_app.webhooks.models import WEBHOOK_EVENT_KINDS, Webhook, WebhookDelivery
from memsite.errors import Conflict, InvalidInput
from memsite.masking import mask_url

DELIVERIES_PER_PAGE = 50
RECENT_DELIVERIES = 10
STATUS_TABS = [("all", "All"), *WebhookDelivery.Status.choices]
ORDER_CHOICES = [("newest", "Newest first"), ("oldest", "Oldest first"), ("attempts", "Most attempts")]
# Where a freshly created or rotated secret waits, in the server-side session, for the one page
# that shows it: a redirect keeps a reload from posting again, and the pop makes it shown once.
SECRET_ONCE_KEY = "webhook_secret_once:{}"  # noqa: S105  (the name of a session key, not a secret)

admin_action = team_admin_action("dashboard:webhooks")


def _kind_label(kind: str) -> str:
    if kind == webhooks.TEST_KIND:
        return "test delivery"
    return str(MemoryEvent.Kind(kind).label) if kind in MemoryEvent.Kind.values else kind


@dataclass(frozen=True)
class Labelled:
    """A webhook or a delivery with the readable names of its event kinds."""

    item: Any
    kinds: list[str]


def _labelled_hooks(hooks: list[Webhook]) -> list[Labelled]:
    return [Labelled(hook, [_kind_label(kind) for kind in hook.event_kinds]) for hook in hooks]


def _labelled_deliveries(deliveries: Any) -> list[Labelled]:
    return [Labelled(delivery, [_kind_label(delivery.kind)]) for delivery in deliveries]


class WebhookForm(forms.Form):
    url = forms.CharField(
        label="Payload URL",
        max_length=2000,
        widget=forms.URLInput(attrs={"placeholder": "https://example.com/memsite-hook", "autocomplete": "off"}),
        help_text="memsite POSTs each event here as JSON, signed with the webhook's secret.",
    )
    description = forms.CharField(label="Description", max_length=200, required=False)
    event_kinds = forms.MultipleChoiceField(
        label="Events",
        choices=[(kind, _kind_label(kind)) for kind in WEBHOOK_EVENT_KINDS],
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one event to send."},
    )
    active = forms.BooleanField(label="Active (deliveries are sent)", required=False)

    def clean_url(self) -> str:
        # The service's own rule, asked here too so a bad URL is reported beside the other fields'
        # errors rather than only once they are fixed.
        url = self.cleaned_data["url"].strip()
        problem = webhooks.webhook_target_problem(url, resolve=False)
        if problem:
            raise forms.ValidationError(problem)
        return url

    @classmethod
    def for_webhook(cls, webhook: Webhook) -> WebhookForm:
        initial = {name: getattr(webhook, name) for name in ("url", "description", "event_kinds", "active")}
        return cls(initial=initial)

    def add_service_errors(self, exc: InvalidInput) -> None:
        """The service's reasons, on the fields they name (the form's top otherwise)."""
        for field, problems in (exc.fields or {"__all__": [exc.detail]}).items():
            for problem in problems:
                self.add_error(field if field in self.fields else None, problem)


def _base_context(request: HttpRequest, team: Team, teams: list[Team], **extra: Any) -> dict[str, Any]:
    can_curate = tenancy_selectors.user_is_team_admin(user=request.user, team=team)
    return {"team": team, "teams": teams, "can_curate": can_curate, "redeliverable": webhooks.REDELIVERABLE, **extra}


def _admins_only(request: HttpRequest, team: Team, teams: list[Team], what: str) -> HttpResponse:
    context = {"team": team, "teams": teams, "back_url_name": "dashboard:webhooks", "what": what}
    return render(request, "memory_app/team_admin_only.html", context, status=403)


# --- the list and the delivery log ------------------------------------------------------------


class DeliveryFilterForm(forms.Form):
    """The log's query string; a value it does not know falls back to showing everything."""

    webhook = forms.ChoiceField(label="Webhook", required=False)
    kind = forms.ChoiceField(label="Event", required=False)
    order = forms.ChoiceField(label="Sort", choices=ORDER_CHOICES, required=False)

    def __init__(self, data: Any, *, hooks: list[Webhook], full_urls: bool) -> None:
        """`full_urls`: the viewer is a team admin, who sees each URL whole; others see it masked."""
        super().__init__(data)
        self.hooks = {str(hook.pk): hook for hook in hooks}
        kinds = [*WEBHOOK_EVENT_KINDS, webhooks.TEST_KIND]
        labels = {key: hook.url if full_urls else mask_url(hook.url) for key, hook in self.hooks.items()}
        choices = {
            "webhook": [("", "All webhooks"), *labels.items()],
            "kind": [("", "All events"), *((kind, _kind_label(kind)) for kind in kinds)],
        }
        for name, offered in choices.items():
            field = self.fields[name]
            assert isinstance(field, forms.ChoiceField)  # declared above; narrows the type
            field.choices = offered

    def filters(self) -> dict[str, Any]:
        self.is_valid()
        data = self.cleaned_data
        return {
            "webhook": self.hooks.get(data.get("webhook") or ""),
            "kind": data.get("kind") or None,
            "order": data.get("order") or "newest",
        }


@team_page
def webhook_list(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    status = request.GET.get("status", "all")
    if status not in dict(STATUS_TABS):
        status = "all"
    hooks = list(webhook_selectors.webhook_list(team=team))
    full_urls = tenancy_selectors.user_is_team_admin(user=request.user, team=team)
    filter_form = DeliveryFilterForm(request.GET, hooks=hooks, full_urls=full_urls)
    deliveries = webhook_selectors.delivery_list(
        team=team, status=None if status == "all" else status, **filter_form.filters()
    )
    page = Paginator(deliveries, DELIVERIES_PER_PAGE).get_page(request.GET.get("page"))
    context = _base_context(
        request,
        team,
        teams,
        webhooks=_labelled_hooks(hooks),
        page=page,
        rows=_labelled_deliveries(page),
        status=status,
        status_tabs=STATUS_TABS,
        filter_form=filter_form,
    )
    return render(request, "memory_app/webhooks.html", context)


# --- one webhook: create, edit, secret, test, enable/disable, delete ----------------------------


def _team_webhook(team: Team, webhook_id: uuid.UUID) -> Webhook:
    return get_or_404(webhook_selectors.webhook_get, team=team, webhook_id=webhook_id)


def _actor(request: HttpRequest) -> str:
    return f"user:{request.user.get_username()}"


@team_page
def webhook_new(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    if not tenancy_selectors.user_is_team_admin(user=request.user, team=team):
        return _admins_only(request, team, teams, "Creating, editing and testing webhooks is for the team's admins.")
    if request.method == "POST":
        form = WebhookForm(request.POST)
        if form.is_valid():
            try:
                webhook, secret = webhooks.webhook_create(team=team, actor=_actor(request), **form.cleaned_data)
            except InvalidInput as exc:
                form.add_service_errors(exc)
            else:
                request.session[SECRET_ONCE_KEY.format(webhook.pk)] = secret
                flash.success(request, "Webhook created.")
                return redirect("dashboard:webhook", webhook.pk)
        status = 400
    else:
        form = WebhookForm(initial={"event_kinds": list(WEBHOOK_EVENT_KINDS), "active": True})
        status = 200
    return render(
        request, "memory_app/webhooks/form.html", _base_context(request, team, teams, form=form), status=status
    )


def _detail(
    request: HttpRequest, team: Team, teams: list[Team], webhook: Webhook, form: WebhookForm, *, status: int = 200
) -> HttpResponse:
    recent = webhook_selectors.delivery_list(team=team, webhook=webhook)[:RECENT_DELIVERIES]
    context = _base_context(
        request,
        team,
        teams,
        webhook=webhook,
        form=form,
        rows=_labelled_deliveries(recent),
        kind_labels=[_kind_label(kind) for kind in webhook.event_kinds],
        # Popped: a reload of the page shows only the hint again.
        new_secret=request.session.pop(SECRET_ONCE_KEY.format(webhook.pk), None),
    )
    return render(request, "memory_app/webhooks/detail.html", context, status=status)


@team_page
def webhook_detail(request: HttpRequest, webhook_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    webhook = _team_webhook(team, webhook_id)
    return _detail(request, team, teams, webhook, WebhookForm.for_webhook(webhook))


@admin_action
def webhook_edit(request: HttpRequest, webhook_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    webhook = _team_webhook(team, webhook_id)
    form = WebhookForm(request.POST)
    if form.is_valid():
        try:
            webhooks.webhook_update(webhook=webhook, data=form.cleaned_data)
        except InvalidInput as exc:
            form.add_service_errors(exc)
        else:
            flash.success(request, "Webhook saved.")
            return redirect("dashboard:webhook", webhook.pk)
    return _detail(request, team, teams, webhook, form, status=400)


@admin_action
def webhook_set_active(request: HttpRequest, webhook_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    webhook = _team_webhook(team, webhook_id)
    # The form says which state it wants, so a double submit cannot flip it back.
    active = request.POST.get("active") == "1"
    webhooks.webhook_update(webhook=webhook, data={"active": active})
    flash.success(request, "Webhook enabled: events are delivered again." if active else "Webhook disabled.")
    return redirect_back(request, reverse("dashboard:webhook", args=[webhook.pk]))


@admin_action
def webhook_rotate_secret(
    request: HttpRequest, webhook_id: uuid.UUID, *, team: Team, teams: list[Team]
) -> HttpResponse:
    webhook, secret = webhooks.webhook_rotate_secret(webhook=_team_webhook(team, webhook_id))
    request.session[SECRET_ONCE_KEY.format(webhook.pk)] = secret
    flash.success(request, "New secret made: deliveries are signed with it from now on.")
    return redirect("dashboard:webhook", webhook.pk)


@admin_action
def webhook_send_test(request: HttpRequest, webhook_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    webhook = _team_webhook(team, webhook_id)
    try:
        delivery = webhooks.webhook_send_test(webhook=webhook, actor=_actor(request))
    except Conflict as exc:
        flash.error(request, exc.detail)
        return redirect_back(request, reverse("dashboard:webhook", args=[webhook.pk]))
    flash.success(request, "Test delivery queued: a worker sends it shortly; it is in the log below.")
    return redirect(reverse("dashboard:webhook_delivery", args=[delivery.pk]))


@admin_action
def webhook_delete(request: HttpRequest, webhook_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    webhook = _team_webhook(team, webhook_id)
    webhooks.webhook_delete(webhook=webhook)
    flash.success(request, f"Deleted the webhook to {webhook.url} and its delivery log.")
    return redirect("dashboard:webhooks")


# --- one delivery ------------------------------------------------------------------------------


@team_page
def delivery_detail(request: HttpRequest, delivery_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    delivery = get_or_404(webhook_selectors.delivery_get, team=team, delivery_id=delivery_id)
    headers = webhooks.delivery_headers(
        delivery,
        timestamp="(the Unix time of each attempt)",
        signature="sha256=… (HMAC-SHA256 under the webhook's secret; not shown)",
    )
    context = _base_context(
        request,
        team,
        teams,
        delivery=delivery,
        kind_label=_kind_label(delivery.kind),
        payload=json.dumps(delivery.payload, indent=2, sort_keys=True),
        headers=headers,
        redelivered_as=webhook_selectors.delivery_list(team=team).filter(redelivery_of=delivery),
        is_test=delivery.kind == webhooks.TEST_KIND,
        max_attempts=settings.WEBHOOK_MAX_ATTEMPTS,
        body_limit=webhooks.RESPONSE_BODY_LIMIT,
    )
    return render(request, "memory_app/webhooks/delivery.html", context)


@admin_action
def webhook_redeliver(request: HttpRequest, delivery_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    delivery = get_or_404(webhook_selectors.delivery_get, team=team, delivery_id=delivery_id)
    try:
        again = webhooks.webhook_redeliver(delivery=delivery)
    except Conflict as exc:
        flash.error(request, exc.detail)
        return redirect_back(request, reverse("dashboard:webhook_delivery", args=[delivery.pk]))
    flash.success(request, "Queued again as a new delivery: a worker sends it shortly.")
    # Back to the log as it was filtered (the form sends `next`), else to the new delivery.
    return redirect_back(request, reverse("dashboard:webhook_delivery", args=[again.pk]))
