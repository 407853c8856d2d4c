"""Document pages: the page thumbnails, one page with its chunks drawn over the render, and
the editors' delete button (a form post: it works without JavaScript; re-run is
ingestion/views.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from common.reading import readable
from knowledge import actions
from knowledge.access import access_document, collection_role
from knowledge.models import Chunk, Document, IndexVersion, Page, Role
from knowledge.renders import can_render
from knowledge.views import type_label
from portal.typing import AuthedRequest

PAGES_PER_SCREEN = 60
# The chunk kinds cut from running text with overlaps (ingestion.chunking._text_chunks).
RUNNING_KINDS = (Chunk.Kind.TEXT, Chunk.Kind.NOTES, Chunk.Kind.TRANSCRIPT)


@login_required
@require_POST
def document_delete(request: AuthedRequest, document_id: int) -> HttpResponse:
    document = access_document(request.user, document_id, write=True)
    name, collection_id = document.name, document.collection_id
    actions.do_delete_document(document)
    messages.success(request, _("“%(name)s” deleted.") % {"name": name})
    return redirect("collection", collection_id)


@login_required
@require_GET
def document_detail(request: AuthedRequest, document_id: int) -> HttpResponse:
    document = _labelled(access_document(request.user, document_id))
    pages = Paginator(document.pages.order_by("number"), PAGES_PER_SCREEN).get_page(request.GET.get("p"))
    context = {
        "document": document,
        "collection": document.collection,
        "pages": pages,
        "thumbs": [(page, can_render(_with_document(page, document))) for page in pages],
        "can_write": _can_write(request, document),
    }
    return render(request, "knowledge/document.html", context)


@dataclass(frozen=True)
class ChunkView:
    """A chunk as the page view shows it: its box in percent of the page, where it has one."""

    chunk: Chunk
    box: dict[str, float] | None
    image: str  # the PageImage hash of an image or frame chunk, else ""
    text: str  # as read: without what the chunk before said, a PDF's lines joined

    @property
    def style(self) -> str:
        box = self.box or {}
        return ";".join(f"--{key}:{value:.3f}%" for key, value in box.items())


@login_required
@require_GET
def document_page(request: AuthedRequest, document_id: int, number: int) -> HttpResponse:
    document = _labelled(access_document(request.user, document_id))
    page = Page.objects.filter(document=document, number=number).first()
    if page is None:
        raise Http404(_("Not found."))
    page.document = document
    selected = _selected_chunk(request, page)
    version = _version_for(page, selected)
    chunks = list(Chunk.objects.filter(page=page, index_version=version).order_by("ordinal")) if version else []
    views = [
        ChunkView(chunk, _box(chunk, page), str(chunk.location.get("image") or ""), text)
        for chunk, text in zip(chunks, _shown_texts(chunks, document.mime, selected), strict=True)
    ]
    context: dict[str, Any] = {
        "document": document,
        "collection": document.collection,
        "page": page,
        "has_render": can_render(page),
        "markdown": document.mime == "text/markdown",  # its text is shown rendered, not as markup
        "chunks": views,
        "boxes": [view for view in views if view.box],
        "images": list(page.images.order_by("pk")),
        "selected": selected,
        "chunk_missing": "chunk" in request.GET and selected is None,
        "previous": document.pages.filter(number__lt=number).order_by("-number").values_list("number", flat=True)[:1],
        "next": document.pages.filter(number__gt=number).order_by("number").values_list("number", flat=True)[:1],
    }
    return render(request, "knowledge/document_page.html", context)


def _shown_texts(chunks: list[Chunk], mime: str, cited: Chunk | None) -> list[str]:
    """Each chunk's text as the list shows it: running text (text, speaker notes, a
    transcript: each kind cut with overlaps of its own) says each overlap once, and a PDF's
    is reflowed; tables, pictures and summaries are shown as stored. The cited chunk is
    shown whole: its quote may lie in the part it shares with the chunk before."""
    reflow = mime == "application/pdf"
    shown = [chunk.text for chunk in chunks]
    for kind in RUNNING_KINDS:
        run = [index for index, chunk in enumerate(chunks) if chunk.kind == kind]
        texts = readable([shown[index] for index in run], reflow=reflow)
        for index, text in zip(run, texts, strict=True):
            shown[index] = readable([chunks[index].text], reflow)[0] if chunks[index] == cited else text
    return shown


def _selected_chunk(request: AuthedRequest, page: Page) -> Chunk | None:
    """The chunk named by ?chunk= (a citation's), when it is on this page in any version."""
    try:
        pk = int(request.GET.get("chunk", ""))
    except ValueError:
        return None
    return Chunk.objects.filter(pk=pk, page=page).first()


def _version_for(page: Page, selected: Chunk | None) -> IndexVersion | None:
    """The version whose chunks are shown: the cited chunk's, else the active one, else the
    newest that has chunks on this page (a document indexed only by a building version)."""
    if selected is not None:
        return selected.index_version
    active = page.document.collection.active_version
    if active is not None and Chunk.objects.filter(page=page, index_version=active).exists():
        return active
    newest = Chunk.objects.filter(page=page).order_by("-index_version__number").select_related("index_version")
    first = newest.first()
    return first.index_version if first else active


def _box(chunk: Chunk, page: Page) -> dict[str, float] | None:
    """The chunk's bbox as percentages of the page. Bboxes are in the page's own units (PDF
    and slide points, picture pixels) as are Page.width/height, and the render covers the
    whole page, so percentages place them on the render at any size."""
    bbox = chunk.location.get("bbox")
    if not bbox or len(bbox) != 4 or not page.width or not page.height:
        return None
    x0, y0, x1, y1 = (float(value) for value in bbox)

    def percent(value: float, whole: float) -> float:
        return max(0.0, min(100.0, 100 * value / whole))

    left, top = percent(x0, page.width), percent(y0, page.height)
    width, height = percent(x1, page.width) - left, percent(y1, page.height) - top
    if width <= 0 or height <= 0:
        return None
    return {"x": left, "y": top, "w": width, "h": height}


def _labelled(document: Document) -> Document:
    document.type_label = type_label(document.mime)  # type: ignore[attr-defined]
    return document


def _with_document(page: Page, document: Document) -> Page:
    page.document = document  # can_render reads the mime: no query per thumbnail
    return page


def _can_write(request: AuthedRequest, document: Document) -> bool:
    role = collection_role(request.user, document.collection)
    return role is not None and role.at_least(Role.EDITOR)
