"""HTTP (Django, and the MCP server at /mcp/) and websockets, served by daphne."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django_asgi_app = get_asgi_application()

from typing import Any  # noqa: E402

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from agents.asgi import is_mcp, mcp_endpoint  # noqa: E402
from operations.instrumentation import asgi_requests  # noqa: E402
from portal.db import for_the_web  # noqa: E402
from portal.routing import websocket_urlpatterns  # noqa: E402
from portal.web import keep_uploads_out_of_memory  # noqa: E402
from portal.ws_auth import PortalAuthStack  # noqa: E402
from portal.ws_origin import BrowserOriginStack  # noqa: E402

for_the_web(settings.DATABASES, settings.WEB_STATEMENT_TIMEOUT)
keep_uploads_out_of_memory()
# The MCP server is no Django view: its requests are counted as the view "mcp" (/metrics).
mcp = asgi_requests(mcp_endpoint, "mcp")


async def http(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """/mcp/ to the MCP server (agents/asgi.py), everything else to Django."""
    if is_mcp(scope["path"]):
        await mcp(scope, receive, send)
    else:
        await django_asgi_app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": http,
        "websocket": BrowserOriginStack(PortalAuthStack(URLRouter(websocket_urlpatterns))),
    }
)
