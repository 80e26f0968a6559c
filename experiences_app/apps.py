from django.apps import AppConfig


class ExperiencesAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "experiences_app"
    verbose_name = "Experiences"
