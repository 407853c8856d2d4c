"""/mcp/ beside Django in the ASGI application (portal/asgi.py): the Host header checked
against ALLOWED_HOSTS as Django checks it, the API token authenticated on every request
(`Authorization: Bearer <key>`, the REST API's hashed tokens: a revoked token is refused at
its next call), and the MCP SDK's session manager started on the first request, since
daphne sends no lifespan events. The server is stateless, so it offers no stream a GET could
open and no session a DELETE could end: any method but POST is a 405 at once, as the
Streamable HTTP transport says (the SDK would hold a GET open without a header)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.translation import gettext as _

from knowledge.api.authentication import key_from_header, user_for_key

Scope = dict[str, Any]


def is_mcp(path: str) -> bool:
    return path == "/mcp" or path.startswith("/mcp/")


class McpEndpoint:
    def __init__(self) -> None:
        self.app: Any = None
        self.ready: asyncio.Event | None = None
        self.runner: asyncio.Task[None] | None = None  # keeps the session manager running

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        domain, _port = split_domain_port(headers.get("host", ""))
        if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
            await reply(send, 400, {"error": "This host name is not allowed (ALLOWED_HOSTS)."})
            return
        key = key_from_header(headers.get("authorization", ""))
        found = await database_sync_to_async(user_for_key)(key) if key else None
        if found is None:
            await reply(
                send,
                401,
                {"error": "An API token is needed: Authorization: Bearer <key> (create one under API tokens)."},
                [(b"www-authenticate", b'Bearer realm="portal"')],
            )
            return
        user, token = found
        if scope["method"] != "POST":
            await reply(
                send,
                405,
                {"error": _("This MCP server is stateless: send every message as a POST.")},
                [(b"allow", b"POST")],
            )
            return
        await self.started()
        await self.app({**scope, "portal.user": user, "portal.token": token}, receive, send)

    async def started(self) -> None:
        """The SDK's app and its session manager, running for as long as this process does."""
        if self.ready is None:
            from agents.mcp import asgi_app, server

            self.ready = asyncio.Event()
            self.app = asgi_app()
            ready = self.ready

            async def keep_running() -> None:
                async with server.session_manager.run():
                    ready.set()
                    await asyncio.Event().wait()

            self.runner = asyncio.get_running_loop().create_task(keep_running())
        await self.ready.wait()


async def reply(send: Any, status: int, body: dict[str, str], extra: list[tuple[bytes, bytes]] | None = None) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


mcp_endpoint = McpEndpoint()
