from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.defaults import page_not_found

from portal.health import database_status, redis_status, storage_status, worker_status


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """Database, Redis, worker and (with PORTAL_STORAGE=s3) object store status as JSON; 503
    when any is down."""
    checks = {"database": database_status(), "redis": redis_status()}
    checks["worker"] = worker_status() if checks["redis"].ok else checks["redis"]
    if (storage := storage_status()) is not None:
        checks["storage"] = storage
    ok = all(status.ok for status in checks.values())
    body = {"ok": ok, **{name: status.as_dict() for name, status in checks.items()}}
    return JsonResponse(body, status=200 if ok else 503)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The 404 of a path no route matches (`/api/documents/abc/`): JSON under /api/, as the
    API's own 404s are, and the HTML page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": _("Not found.")}, status=404)
    return page_not_found(request, exception)
