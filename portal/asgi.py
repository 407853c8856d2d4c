"""HTTP and websockets, served by daphne."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.db.backends.signals import connection_created  # noqa: E402

from portal.db import limit_web_statements, no_persistent_connections  # noqa: E402
from portal.routing import websocket_urlpatterns  # noqa: E402
from portal.web import keep_uploads_out_of_memory  # noqa: E402
from portal.ws_auth import PortalAuthStack  # noqa: E402
from portal.ws_origin import BrowserOriginStack  # noqa: E402

# Only the web process: a worker's statements (index builds, statistics) may take longer.
connection_created.connect(limit_web_statements)
no_persistent_connections()
keep_uploads_out_of_memory()

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": BrowserOriginStack(PortalAuthStack(URLRouter(websocket_urlpatterns))),
    }
)
