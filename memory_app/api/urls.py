from django.urls import path

from memory_app.agent_records import api as agent_memory_views
from memory_app.compaction import api as compaction_api
from memory_app.conversations import api as views
from memory_app.events import api as events_api
from memory_app.facts import api as fact_views
from memory_app.memory_files import api as memory_file_views
from memory_app.rounds import urls as round_urls
from memory_app.search import api as search_api
from memory_app.store import api as store_api
from memory_app.usage import api as usage_views
from memory_app.webhooks import api as webhooks_api

urlpatterns = [
    path("sessions/", views.SessionListCreateView.as_view(), name="session-list"),
    path("sessions/import/", views.SessionImportView.as_view(), name="session-import"),
    path("sessions/<uuid:session_id>/", views.SessionDetailView.as_view(), name="session-detail"),
    path("sessions/<uuid:session_id>/messages/", views.MessageListCreateView.as_view(), name="message-list"),
    path(
        "sessions/<uuid:session_id>/messages/<uuid:message_id>/",
        views.MessageDetailView.as_view(),
        name="message-detail",
    ),
    path("sessions/<uuid:session_id>/reset/", views.SessionResetView.as_view(), name="session-reset"),
    path("sessions/<uuid:session_id>/context/", views.ContextView.as_view(), name="session-context"),
    path("sessions/<uuid:session_id>/export/", views.SessionExportView.as_view(), name="session-export"),
    path("sessions/<uuid:session_id>/compact/", compaction_api.CompactView.as_view(), name="session-compact"),
    path(
        "sessions/<uuid:session_id>/compactions/", compaction_api.CompactionListView.as_view(), name="compaction-list"
    ),
    path(
        "sessions/<uuid:session_id>/compactions/<uuid:run_id>/revert/",
        compaction_api.CompactionRevertView.as_view(),
        name="compaction-revert",
    ),
    path("search/", search_api.SearchView.as_view(), name="search"),
    path("store/batch/", store_api.StoreBatchView.as_view(), name="store-batch"),
    path("events/", events_api.EventListView.as_view(), name="event-list"),
    path("usage/", usage_views.UsageView.as_view(), name="usage"),
    path("contexts/<uuid:context_id>/", usage_views.ContextReplayView.as_view(), name="context-replay"),
    path("events/stream/", events_api.EventStreamView.as_view(), name="event-stream"),
    path("webhooks/", webhooks_api.WebhookListCreateView.as_view(), name="webhook-list"),
    path("webhooks/<uuid:webhook_id>/", webhooks_api.WebhookDetailView.as_view(), name="webhook-detail"),
    path(
        "webhooks/<uuid:webhook_id>/deliveries/",
        webhooks_api.WebhookDeliveryListView.as_view(),
        name="webhook-delivery-list",
    ),
    path(
        "webhooks/<uuid:webhook_id>/deliveries/<uuid:delivery_id>/redeliver/",
        webhooks_api.WebhookRedeliverView.as_view(),
        name="webhook-redeliver",
    ),
    path(
        "sessions/<uuid:session_id>/extract-facts/", fact_views.ExtractFactsView.as_view(), name="session-extract-facts"
    ),
    path("facts/", fact_views.FactListCreateView.as_view(), name="fact-list"),
    path("facts/graph/", fact_views.FactGraphView.as_view(), name="fact-graph"),
    path("facts/<uuid:fact_id>/", fact_views.FactDetailView.as_view(), name="fact-detail"),
    path("fact-extractions/", fact_views.FactExtractionListView.as_view(), name="fact-extraction-list"),
    path(
        "fact-extractions/<uuid:extraction_id>/",
        fact_views.FactExtractionDetailView.as_view(),
        name="fact-extraction-detail",
    ),
    path(
        "fact-extractions/<uuid:extraction_id>/retry/",
        fact_views.FactExtractionRetryView.as_view(),
        name="fact-extraction-retry",
    ),
    path(
        "fact-extractions/<uuid:extraction_id>/accept/",
        fact_views.FactExtractionAcceptView.as_view(),
        name="fact-extraction-accept",
    ),
    path(
        "fact-extractions/<uuid:extraction_id>/discard/",
        fact_views.FactExtractionDiscardView.as_view(),
        name="fact-extraction-discard",
    ),
    # agent work records (discoveries, attempts, decisions, context)
    path(
        "sessions/<uuid:session_id>/agents/<str:agent>/memory/",
        agent_memory_views.AgentMemoryView.as_view(),
        name="agent-memory",
    ),
    path(
        "sessions/<uuid:session_id>/agents/<str:agent>/memory/discoveries/",
        agent_memory_views.EntryAppendView.as_view(kind="discovery"),
        name="agent-memory-discoveries",
    ),
    path(
        "sessions/<uuid:session_id>/agents/<str:agent>/memory/attempts/",
        agent_memory_views.EntryAppendView.as_view(kind="attempt"),
        name="agent-memory-attempts",
    ),
    path(
        "sessions/<uuid:session_id>/agents/<str:agent>/memory/attempts/<str:attempt_id>/",
        agent_memory_views.AttemptDetailView.as_view(),
        name="agent-memory-attempt-detail",
    ),
    path(
        "sessions/<uuid:session_id>/agents/<str:agent>/memory/context/",
        agent_memory_views.MemoryContextView.as_view(),
        name="agent-memory-context",
    ),
    path(
        "sessions/<uuid:session_id>/agents/<str:agent>/memory/decisions/",
        agent_memory_views.EntryAppendView.as_view(kind="decision"),
        name="agent-memory-decisions",
    ),
    path(
        "sessions/<uuid:session_id>/agents/<str:agent>/memory/prompt/",
        agent_memory_views.MemoryPromptView.as_view(),
        name="agent-memory-prompt",
    ),
    path(
        "sessions/<uuid:session_id>/agents/<str:agent>/memory/archive/",
        agent_memory_views.MemoryArchiveView.as_view(),
        name="agent-memory-archive",
    ),
    path(
        "sessions/<uuid:session_id>/arbiter-summary/",
        agent_memory_views.ArbiterSummaryView.as_view(),
        name="session-arbiter-summary",
    ),
    path("attempts/", agent_memory_views.AttemptListView.as_view(), name="attempt-list"),
    # memory files: the file-style memory tool's six commands, history and revert
    path("memory-files/", memory_file_views.MemoryFileListView.as_view(), name="memory-file-list"),
    path("memory-files/command/", memory_file_views.MemoryFileCommandView.as_view(), name="memory-file-command"),
    path("memory-files/versions/", memory_file_views.MemoryFileVersionsView.as_view(), name="memory-file-versions"),
    path("memory-files/revert/", memory_file_views.MemoryFileRevertView.as_view(), name="memory-file-revert"),
]

# rounds, posts, shared memory, conversation export/import (TaskWeaver-style), scratch memory
urlpatterns += round_urls.urlpatterns
