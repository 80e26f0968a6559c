"""Dashboard page of the team's webhooks and their delivery log, with redelivery for the team's admins."""

from __future__ import annotations

import uuid

from django.contrib import messages as flash
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from memory_app.dashboard.decorators import get_or_404, team_admin_action, team_page
from memory_app.tenancy import selectors as tenancy_selectors
from memory_app.tenancy.models import Team
from memory_app.webhooks import selectors as webhook_selectors
from memory_app.webhooks import services as webhooks
from memory_app.webhooks.models import WebhookDelivery
from memsite.errors import Conflict

DELIVERIES_PER_PAGE = 50
STATUS_TABS = [("all", "All"), *WebhookDelivery.Status.choices]


@team_page
def webhook_list(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    status = request.GET.get("status", "all")
    if status not in dict(STATUS_TABS):
        status = "all"
    hooks = list(webhook_selectors.webhook_list(team=team))
    deliveries = webhook_selectors.delivery_list(team=team, status=None if status == "all" else status)
    page = Paginator(deliveries, DELIVERIES_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "team": team,
        "teams": teams,
        "webhooks": hooks,
        "page": page,
        "status": status,
        "status_tabs": STATUS_TABS,
        "can_curate": tenancy_selectors.user_is_team_admin(user=request.user, team=team),
    }
    return render(request, "memory_app/webhooks.html", context)


@team_admin_action("dashboard:webhooks")
def webhook_redeliver(request: HttpRequest, delivery_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    delivery = get_or_404(webhook_selectors.delivery_get, team=team, delivery_id=delivery_id)
    try:
        again = webhooks.webhook_redeliver(delivery=delivery)
    except Conflict as exc:
        flash.error(request, exc.detail)
    else:
        flash.success(request, f"Queued again as delivery {again.pk}: a worker sends it shortly.")
    return redirect(reverse("dashboard:webhooks"))
