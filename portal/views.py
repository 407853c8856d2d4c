from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.template.defaultfilters import filesizeformat
from django.utils.translation import gettext as _
from django.views import defaults
from django.views.decorators.cache import never_cache

from agents.completions import error_body
from common.middleware import SyncAndAsync
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


# Every error status under /api/ and /v1/ is JSON, in the shape its clients read: DRF's
# `{"detail": …}` under /api/, OpenAI's `{"error": {…}}` under /v1/; elsewhere the HTML page.
# json_error() decides, for Django's error handlers (portal/urls.py: a path no route matches,
# a body over DATA_UPLOAD_MAX_MEMORY_SIZE, an error outside DRF) and for JsonErrors, the
# middleware that rewrites any other error a view or middleware answered in HTML or with no
# body (a 416 for a Range past the end of a file, Django's CSRF 403).


def json_error(request: HttpRequest, status: int, detail: str) -> JsonResponse | None:
    """The error as its prefix's clients read it; None outside /api/ and /v1/."""
    path = request.path_info
    if path.startswith("/api/"):
        return JsonResponse({"detail": detail}, status=status)
    if path == "/v1" or path.startswith("/v1/"):
        return JsonResponse(error_body(status, detail), status=status)
    return None


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if isinstance(exception, RequestDataTooBig):
        size = filesizeformat(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        detail = _("The request body is larger than %(size)s.") % {"size": size}
    else:
        detail = _("The request could not be read.")
    return json_error(request, 400, detail) or defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    detail = _("You do not have permission to perform this action.")
    return json_error(request, 403, detail) or defaults.permission_denied(request, exception)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The 404 of a path no route matches (`/api/documents/abc/`, `/v1/embeddings`)."""
    return json_error(request, 404, _("Not found.")) or defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """Django has logged the exception with its traceback already; the body says nothing of it."""
    return json_error(request, 500, server_error_detail()) or defaults.server_error(request)


def status_detail(status: int) -> str:
    """What an error status says when the view that answered it said nothing readable."""
    details = {
        400: _("The request could not be read."),
        403: _("You do not have permission to perform this action."),
        404: _("Not found."),
        405: _("This method is not allowed here."),
        413: _("The request body is too large."),
        416: _("The range asked for starts past the end of the file."),
        500: server_error_detail(),
    }
    return details.get(status) or _("The request failed (HTTP status %(status)d).") % {"status": status}


class JsonErrors(SyncAndAsync):
    """An error status under /api/ or /v1/ answered in HTML, in plain text or with no body
    becomes json_error()'s, its headers kept (Content-Range, Allow, WWW-Authenticate). An
    error DRF raised keeps its data (the browsable API renders it as a page for a browser). A
    JSON body or an event stream (the ask endpoint's `event: error`) is left as it is."""

    def _call(self, request: HttpRequest) -> HttpResponseBase:
        return as_json(request, self.get_response(request))

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        return as_json(request, await self.get_response(request))


def as_json(request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
    if response.status_code < 400 or not unreadable(response):
        return response
    replaced = json_error(request, response.status_code, status_detail(response.status_code))
    if replaced is None:
        return response
    data: Any = getattr(response, "data", None)  # an error DRF's exception handler shaped
    if getattr(response, "exception", False) and isinstance(data, dict | list):
        replaced = JsonResponse(data, status=response.status_code, safe=False)
    for header, value in response.items():
        if header.lower() not in ("content-type", "content-length", "content-disposition"):
            replaced[header] = value
    replaced["Content-Length"] = str(len(replaced.content))
    replaced.cookies = response.cookies
    return replaced


def unreadable(response: HttpResponseBase) -> bool:
    media_type = response.get("Content-Type", "").split(";")[0].strip().lower()
    if media_type in ("text/html", "text/plain", ""):
        return True
    return not response.streaming and not response.content  # type: ignore[attr-defined]
