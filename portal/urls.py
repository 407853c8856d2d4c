from allauth.account.decorators import secure_admin_login
from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic.base import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from operations.metrics import metrics_view
from portal.admin import all_runs
from portal.views import healthz

# Errors no view answered itself: JSON under /api/, the HTML page elsewhere.
handler400 = "portal.views.bad_request"
handler403 = "portal.views.permission_denied"
handler404 = "portal.views.not_found"
handler500 = "portal.views.server_error"

# The admin's own login form called authenticate() outside allauth, so nothing throttled it.
# Wrapped (allauth's documented way) it never authenticates: an anonymous visitor is sent to
# /accounts/login/?next=/admin/..., a signed-in user who is not active staff gets a 403.
# One login page, one limiter and one lockout policy (ACCOUNT_RATE_LIMITS["login_failed"],
# counted in the shared Redis cache) for everyone, and no second dependency like django-axes.
admin.site.login = secure_admin_login(admin.site.login)  # type: ignore[method-assign]

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    # Prometheus' scrapes, by token or from allowed addresses (operations/metrics.py)
    path("metrics", metrics_view, name="metrics"),
    # Browsers ask for it on pages that name no icon (the admin's): the one every page names.
    path(
        "favicon.ico",
        RedirectView.as_view(url=static("portal/favicon.svg"), permanent=True),
        name="favicon",
    ),
    path("admin/runs/", admin.site.admin_view(all_runs), name="admin-runs"),
    path("admin/", admin.site.urls),
    path("accounts/", include("allauth.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    path("api/", include("ingestion.api.urls")),
    path("api/", include("knowledge.api.urls")),
    path("api/", include("assistant.api.urls")),
    path("api/", include("quality.api.urls")),
    path("api/", include("sources.api.urls")),
    path("v1/", include("agents.urls")),  # OpenAI-compatible (agents/completions.py)
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("", include("assistant.urls")),
    path("", include("quality.urls")),
    path("", include("sources.urls")),
    path("", include("ingestion.urls")),
    path("", include("knowledge.urls")),
]
# MEDIA_URL is never served, not even with DEBUG: every stored file goes through a route
# that checks who may see it (originals, page renders, page pictures).
