from __future__ import annotations

from typing import Any
from urllib.parse import ParseResult

from channels.security.websocket import OriginValidator, WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host


class BrowserOriginValidator(OriginValidator):
    """Browsers always send Origin: it must be one of ALLOWED_HOSTS, which stops other sites
    from opening sockets with a visitor's session cookie. Integrations (no Origin) are let
    through to authentication, where they need an API token or a session like anyone."""

    def valid_origin(self, parsed_origin: ParseResult | None) -> bool:
        if parsed_origin is None:
            return True
        return bool(super().valid_origin(parsed_origin))


class HostValidator:
    """The Host header must name one of ALLOWED_HOSTS, as Django requires of every HTTP
    request: a page on another name that resolves to the portal (DNS rebinding) reaches no
    socket. A socket refused here is closed before its handshake ends (HTTP 403)."""

    def __init__(self, application: Any, hosts: list[str]) -> None:
        self.application, self.hosts = application, hosts

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        host = dict(scope.get("headers", [])).get(b"host", b"").decode("latin-1")
        domain, _port = split_domain_port(host)
        if not domain or not validate_host(domain, self.hosts):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)


def BrowserOriginStack(inner: Any) -> Any:  # noqa: N802 (named like Channels' own stacks)
    hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:
        hosts = ["localhost", "127.0.0.1", "[::1]"]
    return HostValidator(BrowserOriginValidator(inner, hosts), hosts)
