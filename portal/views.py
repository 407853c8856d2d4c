from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.defaultfilters import filesizeformat
from django.utils.translation import gettext as _
from django.views import defaults
from django.views.decorators.cache import never_cache

from knowledge.api.views import server_error_detail
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


# Django's error handlers (portal/urls.py): under /api/ the answer is JSON with `detail`, as
# every API view answers, and elsewhere the HTML page. They run for what no API view handled:
# a path no route matches, a body over DATA_UPLOAD_MAX_MEMORY_SIZE, an error outside DRF.


def _api(request: HttpRequest) -> bool:
    return request.path_info.startswith("/api/")


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if not _api(request):
        return defaults.bad_request(request, exception)
    if isinstance(exception, RequestDataTooBig):
        size = filesizeformat(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        detail = _("The request body is larger than %(size)s.") % {"size": size}
    else:
        detail = _("The request could not be read.")
    return JsonResponse({"detail": detail}, status=400)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _api(request):
        return JsonResponse({"detail": _("You do not have permission to perform this action.")}, status=403)
    return defaults.permission_denied(request, exception)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The 404 of a path no route matches (`/api/documents/abc/`)."""
    if _api(request):
        return JsonResponse({"detail": _("Not found.")}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """Django has logged the exception with its traceback already; the body says nothing of it."""
    if _api(request):
        return JsonResponse({"detail": server_error_detail()}, status=500)
    return defaults.server_error(request)
