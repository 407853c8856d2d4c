"""The portal's MCP server (Model Context Protocol, Streamable HTTP, the official `mcp`
SDK): tools to list collections and documents, search, read a page and ask, each run as the
API token's user (agents/asgi.py authenticates every request and puts the user in its
scope). Stateless: every request stands alone, so any web process can serve any call.

Each tool call is logged with the user, the tool, the size of its arguments and its time,
never their content. The tools' own work is in agents/tools.py.

Errors as the specification (2025-11-25) has them: an unknown tool is a protocol error
(JSON-RPC -32602); arguments that do not fit a tool's input schema, and every refusal, are
tool errors (`isError: true`) the agent reads and corrects (SEP-1303), told without the
values sent."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils.translation import gettext as _
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ToolAnnotations
from pydantic import ValidationError

from agents import tools
from assistant.answering.events import Event, collect
from assistant.answering.pipeline import streamed_events
from assistant.answering.session import AskError, start
from portal.limits import allow, allow_question
from portal.typing import AnyUser

log = logging.getLogger(__name__)
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
PATH = "/mcp/"
T = TypeVar("T")


class PortalServer(MCPServer):
    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """The SDK's call, with the errors the specification asks for: an unknown tool is
        a protocol error, not a tool's; arguments of the wrong type are a tool error that
        names each argument and the type its schema gives, never the value sent (pydantic's
        own message quotes it, with a link to pydantic's site)."""
        schemas = {tool.name: tool.input_schema for tool in await self.list_tools()}
        if name not in schemas:
            raise MCPError(INVALID_PARAMS, _("Unknown tool: %(name)s") % {"name": name[:100]})
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(unfit_arguments(exc.__cause__, schemas[name])) from exc.__cause__
            raise


def unfit_arguments(error: ValidationError, schema: dict[str, Any]) -> str:
    """Each argument pydantic refused, with the JSON type its input schema gives."""
    properties = schema.get("properties", {})
    problems: dict[str, str] = {}
    for item in error.errors(include_url=False, include_input=False, include_context=False):
        name = str(item["loc"][0]) if item["loc"] else ""
        if item["type"] == "missing":
            problems.setdefault(name, _("%(name)s is missing") % {"name": name})
        else:
            expected = json_types(properties.get(name, {}))
            problems.setdefault(name, _("%(name)s should be %(type)s") % {"name": name, "type": expected})
    return _("These arguments do not fit the tool's input schema: %(problems)s.") % {
        "problems": "; ".join(problems.values())
    }


def json_types(schema: dict[str, Any]) -> str:
    """`integer`, `array or null`: the types a JSON schema allows, in its own words."""
    options = schema.get("anyOf", [schema])
    return " or ".join(str(option.get("type", "any")) for option in options)


server = PortalServer(
    name="portal",
    title="Team knowledge portal",
    instructions=(
        "Search and ask the team's documents with your own permissions. Answers cite file, page "
        "and chunk. 团队知识库：按你的权限检索文档、提问，回答注明文件、页码与段落。"
    ),
)


def user_of(ctx: Context[Any, Any]) -> AnyUser:
    """The API token's user, put in the request's scope by agents.asgi."""
    request = ctx.request_context.request
    user = getattr(request, "scope", {}).get("portal.user") if request is not None else None
    if user is None:
        raise ToolError("Not authenticated.")
    return user


def counted(work: Callable[[AnyUser], T]) -> Callable[[AnyUser], T]:
    """`work`, once the call is counted against the user's searches and page reads a minute
    (PORTAL_MCP_READS_PER_MINUTE, counted in Redis as the questions are: portal.limits)."""

    def run(user: AnyUser) -> T:
        if not allow("mcp_reads", user.pk or 0, settings.MCP_READS_PER_MINUTE):
            raise tools.ToolRefused(
                _("Too many searches and page reads in a minute (at most %(count)d); wait a little and try again.")
                % {"count": settings.MCP_READS_PER_MINUTE}
            )
        return work(user)

    return run


async def call(ctx: Context[Any, Any], name: str, arguments: dict[str, Any], work: Any) -> Any:
    """Run `work(user)` in a thread of the pool (the ORM is synchronous; its connection closed
    when stale, as Django closes a request's), log the call, and turn a ToolRefused into the
    tool error the agent reads."""
    user = user_of(ctx)
    started_at = time.perf_counter()
    size = len(json.dumps(arguments, ensure_ascii=False, default=str))
    outcome = "ok"
    try:
        return await database_sync_to_async(work, thread_sensitive=False)(user)
    except tools.ToolRefused as exc:
        outcome = "refused"
        raise ToolError(str(exc)) from None
    finally:
        log.info(
            "mcp tool %s by user %s: %s bytes of arguments, %s, %.2f s",
            name,
            user.pk,
            size,
            outcome,
            time.perf_counter() - started_at,
        )


@server.tool(
    title="List collections · 列出知识库",
    description="The collections you may read, with how many documents each has ready. "
    "列出你可以读取的知识库及其已就绪的文档数。",
    annotations=READ,
)
async def list_collections(ctx: Context[Any, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = await call(ctx, "list_collections", {}, tools.list_collections)
    return result


@server.tool(
    title="List documents · 列出文档",
    description="The documents of one collection (its id from list_collections), with status and pages. "
    "列出某个知识库的文档（状态、页数）。",
    annotations=READ,
)
async def list_documents(collection: int, ctx: Context[Any, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = await call(
        ctx, "list_documents", {"collection": collection}, lambda user: tools.list_documents(user, collection)
    )
    return result


@server.tool(
    title="Search · 检索",
    description="Passages matching a query (Chinese or English), best first: file, page (or slide, or "
    "timestamp), chunk id, score, text and a link to the page. `collections`: ids to search (all you may "
    "read when left out); `k`: 1–50. 按问题检索段落，返回文件、页码、段落编号、分数、原文与链接。",
    annotations=READ,
)
async def search(
    query: str, ctx: Context[Any, Any], collections: list[int] | None = None, k: int = 5
) -> dict[str, Any]:
    arguments = {"query": query, "collections": collections, "k": k}
    result: dict[str, Any] = await call(
        ctx, "search", arguments, counted(lambda user: tools.search(user, query, collections, k))
    )
    return result


@server.tool(
    title="Read a page · 读取页面",
    description="The text of one page (or slide, or section) of a document, by document id and page "
    "number; with `image`, its render as PNG in base64 where the document has one. "
    "读取文档某一页的文字（可附页面图像）。",
    annotations=READ,
)
async def get_page(document: int, page: int, ctx: Context[Any, Any], image: bool = False) -> dict[str, Any]:
    arguments = {"document": document, "page": page, "image": image}
    result: dict[str, Any] = await call(
        ctx, "get_page", arguments, counted(lambda user: tools.get_page(user, document, page, image))
    )
    return result


@server.tool(
    title="Ask · 提问",
    description="An answer to a question from the documents, citing file, page and chunk, with matching "
    "pictures attached; progress is sent while it is written. `conversation`: continue one of yours. "
    "根据文档回答问题，注明出处；可延续你自己的对话。",
    annotations=ToolAnnotations(read_only_hint=False, open_world_hint=False),
)
async def ask(
    question: str, ctx: Context[Any, Any], collections: list[int] | None = None, conversation: int | None = None
) -> dict[str, Any]:
    arguments = {"question": question, "collections": collections, "conversation": conversation}
    user = user_of(ctx)

    def begin(user: AnyUser) -> Any:
        data = tools.ask_arguments(question, collections, conversation)
        if not allow_question(user.pk or 0):
            raise tools.ToolRefused(_("Too many questions in a minute; wait a little and ask again."))
        try:
            return start(
                user,
                data["question"],
                collection_ids=data.get("collections") or None,
                conversation_id=data.get("conversation"),
            )
        except AskError as exc:
            raise tools.ToolRefused(str(tools.not_found()) if exc.code == "not_found" else exc.message) from None

    session = await call(ctx, "ask", arguments, begin)
    events: list[Event] = []
    async for event in streamed_events(session):
        events.append(event)
        await ctx.report_progress(len(events), message=event.type)
    result = collect(events)
    log.info("mcp ask by user %s answered: %s events", user.pk, len(events))
    if result["error"] is not None:
        raise ToolError(result["error"]["message"])
    keep = ("answer", "abstain", "citations", "attachments", "closest", "strategy", "conversation", "message")
    return {key: result[key] for key in keep}


def asgi_app() -> Any:
    """The Streamable HTTP app at PATH, stateless. Host names are checked by agents.asgi
    against ALLOWED_HOSTS, as Django checks them, and no cookie is read, so the SDK's own
    rebinding check (localhost only) is left off."""
    return server.streamable_http_app(
        streamable_http_path=PATH,
        stateless_http=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
