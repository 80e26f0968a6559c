from django.urls import path

from experiences_app.api import views

# The fixed paths come before experiences/<exp_id>/; services refuse those words as exp_ids.
urlpatterns = [
    path("experiences/", views.ExperienceListCreateView.as_view(), name="experience-list"),
    path("experiences/import/", views.ExperienceImportView.as_view(), name="experience-import"),
    path("experiences/export/", views.ExperienceExportView.as_view(), name="experience-export"),
    path("experiences/select/", views.ExperienceSelectView.as_view(), name="experience-select"),
    path("experiences/config/", views.ExperienceConfigView.as_view(), name="experience-config"),
    path("experiences/<slug:exp_id>/", views.ExperienceDetailView.as_view(), name="experience-detail"),
    path(
        "experiences/<slug:exp_id>/revisions/", views.ExperienceRevisionListView.as_view(), name="experience-revisions"
    ),
    path("experiences/<slug:exp_id>/diff/", views.ExperienceDiffView.as_view(), name="experience-diff"),
    path("experiences/<slug:exp_id>/approve/", views.ExperienceApproveView.as_view(), name="experience-approve"),
    path("experience-selections/", views.SelectionLogListView.as_view(), name="experience-selection-list"),
    path(
        "experience-selections/<uuid:selection_id>/",
        views.SelectionLogDetailView.as_view(),
        name="experience-selection-detail",
    ),
    path(
        "experience-selections/<uuid:selection_id>/download/",
        views.SelectionLogDownloadView.as_view(),
        name="experience-selection-download",
    ),
]
