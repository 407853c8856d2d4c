"""What the MCP tools do, as plain synchronous functions of a user: each filters by what
the user may see, inside the SQL (knowledge.access, Collection.objects.visible_to), and
says "not found" for anything else, as the REST API does. Arguments are checked by the REST
API's own serializers, so both take the same limits."""

from __future__ import annotations

import base64
from dataclasses import asdict
from typing import Any

from django.db.models import Count, Q
from django.http import Http404
from django.utils.translation import gettext as _
from rest_framework import serializers

from assistant.api.serializers import AskRequestSerializer, SearchRequestSerializer
from assistant.retrieval.search import search as search_chunks
from knowledge.access import access_collection, access_document
from knowledge.models import Collection, Document, Page
from knowledge.renders import ensure_render
from portal.typing import AnyUser

PAGE_TEXT_MAX = 20_000  # characters of a page's text a tool returns (a spreadsheet page can be long)


class ToolRefused(Exception):  # noqa: N818 (a refusal, told to the agent)
    """A tool call that cannot be done, with a message for the person or agent calling it."""


def checked(serializer_class: type[serializers.Serializer[Any]], data: dict[str, Any]) -> dict[str, Any]:
    """The arguments as the REST API's serializer takes them, or ToolRefused naming each
    argument that is wrong."""
    form = serializer_class(data={key: value for key, value in data.items() if value is not None})
    if not form.is_valid():
        raise ToolRefused(message_of(form.errors))
    return dict(form.validated_data)


def message_of(errors: Any) -> str:
    """DRF's errors as one line: its `detail`, or "field: message; field: message" (the MCP
    tools' refusals and the OpenAI-compatible errors)."""
    if isinstance(errors, dict):
        if "detail" in errors:
            return str(errors["detail"])
        return "; ".join(f"{field}: {message_of(value)}" for field, value in errors.items())
    if isinstance(errors, list):
        return " ".join(message_of(item) for item in errors)
    return str(errors)


def not_found() -> ToolRefused:
    return ToolRefused(_("Not found: it does not exist, or you may not see it."))


def list_collections(user: AnyUser) -> list[dict[str, Any]]:
    ready = Count("documents", filter=Q(documents__status=Document.Status.READY))
    rows = Collection.objects.visible_to(user).annotate(ready=ready).order_by("name")
    return [
        {"id": pk, "name": name, "description": description, "documents": count}
        for pk, name, description, count in rows.values_list("pk", "name", "description", "ready")
    ]


def list_documents(user: AnyUser, collection: int) -> list[dict[str, Any]]:
    try:
        found = access_collection(user, collection)
    except Http404:
        raise not_found() from None
    documents = Document.objects.filter(collection=found).order_by("rel_path")
    return [
        {"id": d.pk, "path": d.rel_path, "status": d.status, "pages": d.page_count, "error": d.error} for d in documents
    ]


def search(user: AnyUser, query: str, collections: list[int] | None, k: int) -> dict[str, Any]:
    data = checked(SearchRequestSerializer, {"query": query, "collections": collections, "k": k})
    named = data.get("collections")
    for collection_id in named or ():
        try:
            access_collection(user, collection_id)
        except Http404:
            raise not_found() from None
    results = search_chunks(user, data["query"], collection_ids=named, k=data["k"])
    return {
        "query": results.query,
        "hits": [passage(asdict(hit)) for hit in results.hits],
        "attachments": [passage(asdict(hit)) for hit in results.attachments],
    }


def passage(hit: dict[str, Any]) -> dict[str, Any]:
    """A hit as an agent needs it: where it is, how it scored, its text, and a link."""
    return {
        "chunk": hit["chunk_id"],
        "document": hit["document_id"],
        "file": hit["rel_path"],
        "page": hit["page_number"],
        "page_kind": hit["page_kind"],
        "timestamp": hit["location"].get("t_start"),  # seconds into a video or clip
        "score": round(float(hit["score"]), 4),
        "text": hit["text"],
        "link": f"/documents/{hit['document_id']}/pages/{hit['page_number']}/?chunk={hit['chunk_id']}",
    }


def get_page(user: AnyUser, document: int, page: int, image: bool) -> dict[str, Any]:
    try:
        found = access_document(user, document)
    except Http404:
        raise not_found() from None
    row = Page.objects.filter(document=found, number=page).select_related("document").first()
    if row is None:
        raise ToolRefused(
            _("The document has no page %(number)s; it has %(count)s.") % {"number": page, "count": found.page_count}
        )
    result: dict[str, Any] = {
        "document": found.pk,
        "file": found.rel_path,
        "page": row.number,
        "pages": found.page_count,
        "kind": row.kind,
        "headings": row.heading_path,
        "text": row.text[:PAGE_TEXT_MAX],
        "truncated": len(row.text) > PAGE_TEXT_MAX,
        "link": f"/documents/{found.pk}/pages/{row.number}/",
    }
    if image:
        try:
            has_render = ensure_render(row)
        except FileNotFoundError:
            has_render = False
        if has_render:
            with row.render.open("rb") as handle:
                result["image_png_base64"] = base64.b64encode(handle.read()).decode()
    return result


def ask_arguments(question: str, collections: list[int] | None, conversation: int | None) -> dict[str, Any]:
    return checked(
        AskRequestSerializer, {"question": question, "collections": collections, "conversation": conversation}
    )
