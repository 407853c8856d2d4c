"""The portal's URLconf, its error handlers included, plus views that fail in ways no real
route can be made to on demand: an exception nobody expected, a refusal raised outside DRF.
tests/hardening/test_api_errors.py uses it as ROOT_URLCONF."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import path
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal import urls

SECRET = "internal detail: /srv/portal/secret.py"


class Failing(APIView):
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        raise RuntimeError(SECRET)


def failing(request: HttpRequest) -> HttpResponse:
    raise RuntimeError(SECRET)


def refusing(request: HttpRequest) -> HttpResponse:
    raise PermissionDenied(SECRET)


handler400 = urls.handler400
handler403 = urls.handler403
handler404 = urls.handler404
handler500 = urls.handler500

urlpatterns = [
    path("api/test-failing/drf/", Failing.as_view()),
    path("api/test-failing/plain/", failing),
    path("api/test-refusing/", refusing),
    path("test-failing/", failing),
    path("test-refusing/", refusing),
    *urls.urlpatterns,
]
