from django.urls import path

from memory_app.api import views

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
    path("sessions/<uuid:session_id>/compact/", views.CompactView.as_view(), name="session-compact"),
    path("sessions/<uuid:session_id>/compactions/", views.CompactionListView.as_view(), name="compaction-list"),
    path(
        "sessions/<uuid:session_id>/compactions/<uuid:run_id>/revert/",
        views.CompactionRevertView.as_view(),
        name="compaction-revert",
    ),
    path("events/", views.EventListView.as_view(), name="event-list"),
]
