from django.urls import path

from memory_app import views

urlpatterns = [
    path("", views.session_list, name="sessions"),
    path("sessions/<uuid:session_id>/", views.session_detail, name="session"),
    path("sessions/<uuid:session_id>/compact/", views.session_compact, name="session_compact"),
    path(
        "sessions/<uuid:session_id>/compactions/<uuid:run_id>/revert/",
        views.session_compaction_revert,
        name="compaction_revert",
    ),
    path("team/", views.switch_team, name="switch_team"),
    path("ops/", views.ops, name="ops"),
    path("ops/status/", views.ops_status, name="ops_status"),
    path("ops/jobs/<slug:kind>/<uuid:job_id>/retry/", views.ops_job_retry, name="ops_job_retry"),
]
