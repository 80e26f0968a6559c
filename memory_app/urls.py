from django.urls import path

from memory_app.agent_records import pages as agent_pages
from memory_app.compaction import pages as compaction_pages
from memory_app.conversations import pages as views
from memory_app.dashboard import decorators as dashboard
from memory_app.events import pages as event_pages
from memory_app.facts import pages as fact_pages
from memory_app.memory_files import pages as memory_file_pages
from memory_app.ops import pages as ops_pages
from memory_app.rounds import pages as round_pages
from memory_app.search import pages as search_pages
from memory_app.usage import pages as usage_pages
from memory_app.webhooks import pages as webhook_pages

urlpatterns = [
    path("", views.session_list, name="sessions"),
    path("sessions/<uuid:session_id>/", views.session_detail, name="session"),
    path("usage/", usage_pages.usage_page, name="usage"),
    path("usage/contexts/<int:serve_id>/", usage_pages.served_context_page, name="served_context"),
    path("usage/contexts/<uuid:context_id>/", usage_pages.served_context_by_id_page, name="served_context_by_id"),
    path("agents/", agent_pages.agent_list, name="agents"),
    # <path:>: an agent name from a message or a key may hold "/" (agent_pages.agent_url).
    path("agents/<path:agent>/", agent_pages.agent_detail, name="agent"),
    path("memory-files/", memory_file_pages.memory_file_list, name="memory_files"),
    path("memory-files/new/", memory_file_pages.memory_file_new, name="memory_file_new"),
    path("memory-files/<int:file_id>/", memory_file_pages.memory_file_detail, name="memory_file"),
    path("memory-files/<int:file_id>/edit/", memory_file_pages.memory_file_edit, name="memory_file_edit"),
    path("memory-files/<int:file_id>/revert/", memory_file_pages.memory_file_revert, name="memory_file_revert"),
    path("sessions/<uuid:session_id>/rounds/", round_pages.session_rounds, name="session_rounds"),
    path("sessions/<uuid:session_id>/agents/<str:agent>/", round_pages.agent_memory, name="agent_memory"),
    path("sessions/<uuid:session_id>/compact/", compaction_pages.session_compact, name="session_compact"),
    path(
        "sessions/<uuid:session_id>/compaction/status/",
        compaction_pages.session_compaction_status,
        name="session_compaction_status",
    ),
    path(
        "sessions/<uuid:session_id>/compactions/<uuid:run_id>/revert/",
        compaction_pages.session_compaction_revert,
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
    path("webhooks/new/", webhook_pages.webhook_new, name="webhook_new"),
    path("webhooks/<uuid:webhook_id>/", webhook_pages.webhook_detail, name="webhook"),
    path("webhooks/<uuid:webhook_id>/edit/", webhook_pages.webhook_edit, name="webhook_edit"),
    path("webhooks/<uuid:webhook_id>/active/", webhook_pages.webhook_set_active, name="webhook_set_active"),
    path("webhooks/<uuid:webhook_id>/secret/", webhook_pages.webhook_rotate_secret, name="webhook_rotate_secret"),
    path("webhooks/<uuid:webhook_id>/test/", webhook_pages.webhook_send_test, name="webhook_test"),
    path("webhooks/<uuid:webhook_id>/delete/", webhook_pages.webhook_delete, name="webhook_delete"),
    path("webhooks/deliveries/<uuid:delivery_id>/", webhook_pages.delivery_detail, name="webhook_delivery"),
    path(
        "webhooks/deliveries/<uuid:delivery_id>/redeliver/", webhook_pages.webhook_redeliver, name="webhook_redeliver"
    ),
    path("events/", event_pages.event_list, name="events"),
    path("team/", dashboard.switch_team, name="switch_team"),
    path("ops/", ops_pages.ops, name="ops"),
    path("ops/status/", ops_pages.ops_status, name="ops_status"),
    path("ops/jobs/", ops_pages.ops_jobs, name="ops_jobs"),
    path("ops/jobs/<slug:kind>/<uuid:job_id>/", ops_pages.ops_job, name="ops_job"),
    path("ops/jobs/<slug:kind>/<uuid:job_id>/retry/", ops_pages.ops_job_retry, name="ops_job_retry"),
    path("ops/search/reindex/", ops_pages.ops_search_reindex, name="ops_search_reindex"),
]
