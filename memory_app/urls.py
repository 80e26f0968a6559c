from django.urls import path

from memory_app.conversations import pages as views
from memory_app.dashboard import decorators as dashboard
from memory_app.facts import pages as fact_pages
from memory_app.ops import pages as ops_pages
from memory_app.rounds import pages as round_pages
from memory_app.search import pages as search_pages
from memory_app.usage import pages as usage_pages
from memory_app.webhooks import pages as webhook_pages

urlpatterns = [
    path("", views.session_list, name="sessions"),
    path("sessions/<uuid:session_id>/", views.session_detail, name="session"),
    path("usage/", usage_pages.usage_page, name="usage"),
    path("sessions/<uuid:session_id>/rounds/", round_pages.session_rounds, name="session_rounds"),
    path("sessions/<uuid:session_id>/agents/<str:agent>/", round_pages.agent_memory, name="agent_memory"),
    path("sessions/<uuid:session_id>/compact/", views.session_compact, name="session_compact"),
    path(
        "sessions/<uuid:session_id>/compactions/<uuid:run_id>/revert/",
        views.session_compaction_revert,
        name="compaction_revert",
    ),
    path("search/", search_pages.search_page, name="search"),
    path("facts/", fact_pages.fact_list, name="facts"),
    path("facts/graph/", fact_pages.fact_graph, name="fact_graph"),
    path("facts/graph/data/", fact_pages.fact_graph_data, name="fact_graph_data"),
    path("facts/extractions/", fact_pages.fact_extraction_list, name="fact_extractions"),
    path("facts/extractions/<uuid:run_id>/", fact_pages.fact_extraction_detail, name="fact_extraction"),
    path("facts/extractions/<uuid:run_id>/retry/", fact_pages.fact_extraction_retry, name="fact_extraction_retry"),
    path("facts/extractions/<uuid:run_id>/accept/", fact_pages.fact_extraction_accept, name="fact_extraction_accept"),
    path(
        "facts/extractions/<uuid:run_id>/discard/",
        fact_pages.fact_extraction_discard,
        name="fact_extraction_discard",
    ),
    path("facts/<uuid:fact_id>/", fact_pages.fact_detail, name="fact"),
    path("facts/<uuid:fact_id>/edit/", fact_pages.fact_edit, name="fact_edit"),
    path("facts/<uuid:fact_id>/invalidate/", fact_pages.fact_invalidate, name="fact_invalidate"),
    path("facts/<uuid:fact_id>/restore/", fact_pages.fact_restore, name="fact_restore"),
    path("webhooks/", webhook_pages.webhook_list, name="webhooks"),
    path(
        "webhooks/deliveries/<uuid:delivery_id>/redeliver/", webhook_pages.webhook_redeliver, name="webhook_redeliver"
    ),
    path("team/", dashboard.switch_team, name="switch_team"),
    path("ops/", ops_pages.ops, name="ops"),
    path("ops/status/", ops_pages.ops_status, name="ops_status"),
    path("ops/jobs/<slug:kind>/<uuid:job_id>/retry/", ops_pages.ops_job_retry, name="ops_job_retry"),
    path("ops/search/reindex/", ops_pages.ops_search_reindex, name="ops_search_reindex"),
]
