from django.urls import path

from experiences_app import views

# One experience lives under e/<exp_id>/: an exp_id such as "review" or "new" is a valid slug,
# so the fixed pages must never share its path segment.
urlpatterns = [
    path("", views.experience_list, name="list"),
    path("new/", views.experience_new, name="new"),
    path("validate/", views.experience_validate, name="validate"),
    path("review/", views.experience_review, name="review"),
    path("try/", views.experience_try, name="try"),
    path("selections/", views.selection_list, name="selections"),
    path("selections/<uuid:log_id>/", views.selection_detail, name="selection"),
    path("selections/<uuid:log_id>/download/", views.selection_log_download, name="selection_download"),
    path("import/", views.experience_import, name="import"),
    path("export/", views.experience_export, name="export"),
    path("settings/", views.experience_config, name="config"),
    path("settings/save/", views.experience_config_save, name="config_save"),
    path("e/<slug:exp_id>/", views.experience_detail, name="detail"),
    path("e/<slug:exp_id>/edit/", views.experience_edit, name="edit"),
    path("e/<slug:exp_id>/approve/", views.experience_approve, name="approve"),
    path("e/<slug:exp_id>/reject/", views.experience_reject, name="reject"),
    path("e/<slug:exp_id>/disable/", views.experience_disable, name="disable"),
]
