"""Django's admin app, installed with memsite's admin site (an app config module imports no models)."""

from django.contrib.admin.apps import AdminConfig


class MemsiteAdminConfig(AdminConfig):
    default_site = "memsite.admin_site.MemsiteAdminSite"
