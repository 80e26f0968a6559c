from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from memory_app.mcp.api import mcp_endpoint
from memsite.health import healthz
from memsite.login_throttle import throttle_failed_logins
from memsite.metrics_view import metrics

# Errors Django answers itself (an id that does not match its URL converter ...) are JSON under /api/.
handler404 = "memsite.api_errors.page_not_found"
handler500 = "memsite.api_errors.server_error"

urlpatterns = [
    # The API first: agents call it on every turn, and Django tries these patterns in order.
    path("api/v1/", include("memory_app.api.urls")),
    path("api/v1/", include("experiences_app.api.urls")),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path("accounts/login/", throttle_failed_logins(auth_views.LoginView.as_view()), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # metadata_class=None: OPTIONS answers 405 (the HTML renderer has no template for DRF's metadata).
    # The split view serves Swagger UI's init script as a file (?script), as the Content-Security-Policy
    # allows no inline script; the template takes the package's inline <style> out the same way.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(
            url_name="schema", template_name="api_docs/swagger_ui.html", metadata_class=None
        ),
        name="swagger-ui",
    ),
    # The MCP server (docs/mcp.md); hosts are often configured without the trailing slash.
    path("mcp/", mcp_endpoint, name="mcp"),
    path("mcp", mcp_endpoint),
    path("experiences/", include(("experiences_app.urls", "experiences"), namespace="experiences")),
    path("", include(("memory_app.urls", "dashboard"), namespace="dashboard")),
]
