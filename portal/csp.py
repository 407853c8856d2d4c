"""Content-Security-Policy on every page: scripts, styles, pictures and connections from the
portal itself only, so that an injected <script> or a file name holding markup cannot run
(templates escape it; this is the second line). Inline style attributes stay allowed (the
page view places chunk boxes with them); inline scripts and event handlers do not.

The API's interactive docs (/api/docs/, Swagger UI starts from an inline script) are left
without the header; they show no user data."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "media-src 'self' blob:",
        "font-src 'self' data:",
        "connect-src 'self'",  # CSP 3: 'self' covers ws:// and wss:// to this host
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
EXEMPT = ("/api/docs/",)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.get("Content-Type", "").startswith("text/html") and not request.path.startswith(EXEMPT):
            response.headers.setdefault("Content-Security-Policy", POLICY)
        return response
