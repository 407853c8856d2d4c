from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from portal.views import healthz

# A path that no route matches gets JSON under /api/, the HTML page elsewhere.
handler404 = "portal.views.not_found"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("accounts/", include("allauth.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    path("api/", include("ingestion.api.urls")),
    path("api/", include("knowledge.api.urls")),
    path("api/", include("assistant.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("", include("assistant.urls")),
    path("", include("ingestion.urls")),
    path("", include("knowledge.urls")),
]
# MEDIA_URL is never served, not even with DEBUG: every stored file goes through a route
# that checks who may see it (originals, page renders, page pictures).
