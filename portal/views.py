from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache

from portal.health import database_status, redis_status, worker_status


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """Database, Redis and worker status as JSON; 503 when any is down."""
    checks = {"database": database_status(), "redis": redis_status()}
    checks["worker"] = worker_status() if checks["redis"].ok else checks["redis"]
    ok = all(status.ok for status in checks.values())
    body = {"ok": ok, **{name: status.as_dict() for name, status in checks.items()}}
    return JsonResponse(body, status=200 if ok else 503)
