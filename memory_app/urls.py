from django.urls import path

from memory_app import views

urlpatterns = [
    path("", views.session_list, name="sessions"),
    path("sessions/<uuid:session_id>/", views.session_detail, name="session"),
    path("team/", views.switch_team, name="switch_team"),
]
