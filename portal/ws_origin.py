from __future__ import annotations

from typing import Any
from urllib.parse import ParseResult

from channels.security.websocket import OriginValidator
from django.conf import settings


class BrowserOriginValidator(OriginValidator):
    """Browsers always send Origin: it must be one of ALLOWED_HOSTS, which stops other sites
    from opening sockets with a visitor's session cookie. Integrations (no Origin) are let
    through to authentication, where they need an API token or a session like anyone."""

    def valid_origin(self, parsed_origin: ParseResult | None) -> bool:
        if parsed_origin is None:
            return True
        return bool(super().valid_origin(parsed_origin))


def BrowserOriginStack(inner: Any) -> Any:  # noqa: N802 (named like Channels' own stacks)
    hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:
        hosts = ["localhost", "127.0.0.1", "[::1]"]
    return BrowserOriginValidator(inner, hosts)
