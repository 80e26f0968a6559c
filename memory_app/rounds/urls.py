"""Routes of the rounds, posts, shared memory, conversation and scratch API."""

from django.urls import path

from memory_app.rounds import api as round_views

urlpatterns = [
    path("sessions/conversation/import/", round_views.ConversationImportView.as_view(), name="conversation-import"),
    path("sessions/<uuid:session_id>/rounds/", round_views.RoundListCreateView.as_view(), name="round-list"),
    path(
        "sessions/<uuid:session_id>/rounds/<str:round_id>/", round_views.RoundDetailView.as_view(), name="round-detail"
    ),
    path(
        "sessions/<uuid:session_id>/rounds/<str:round_id>/posts/",
        round_views.PostCreateView.as_view(),
        name="round-posts",
    ),
    path("sessions/<uuid:session_id>/shared-memory/", round_views.SharedMemoryView.as_view(), name="shared-memory"),
    path(
        "sessions/<uuid:session_id>/conversation/",
        round_views.ConversationExportView.as_view(),
        name="conversation-export",
    ),
    path("sessions/<uuid:session_id>/scratch/", round_views.ScratchView.as_view(), name="session-scratch"),
]
