"""Documents through the API: list, status, pages, delete, download the original, fetch a page
render, and a collection's index versions. Every lookup goes through the access helpers.
Uploads, video links and the versions' actions start ingestion: ingestion/api/documents.py."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db.models import QuerySet
from django.db.models.fields.files import FieldFile
from django.http import FileResponse, Http404, HttpResponse
from django.http.response import HttpResponseBase
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.storage import open_stream, read_range
from knowledge import actions
from knowledge.access import access_collection, access_document, access_page
from knowledge.api.serializers import DocumentSerializer, IndexVersionSerializer, PageSerializer
from knowledge.models import Document, IndexVersion, Page, PageImage
from knowledge.renders import ensure_render

COLLECTION_ID = OpenApiParameter("collection_id", OpenApiTypes.INT, OpenApiParameter.PATH)


class CollectionDocumentsView(generics.ListAPIView[Document]):
    """GET: the collection's documents (served with uploads by ingestion.api.documents)."""

    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    serializer_class = DocumentSerializer

    def get_queryset(self) -> QuerySet[Document]:
        if getattr(self, "swagger_fake_view", False):
            return Document.objects.none()
        collection = access_collection(self.request.user, self.kwargs["collection_id"])
        return Document.objects.filter(collection=collection).order_by("rel_path")

    @extend_schema(parameters=[COLLECTION_ID])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


class DocumentView(generics.RetrieveDestroyAPIView[Document]):
    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)
    serializer_class = DocumentSerializer

    def get_object(self) -> Document:
        return access_document(self.request.user, self.kwargs["pk"], write=self.request.method == "DELETE")

    def perform_destroy(self, instance: Document) -> None:
        actions.do_delete_document(instance)


class DocumentPagesView(generics.ListAPIView[Page]):
    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)
    serializer_class = PageSerializer

    def get_queryset(self) -> QuerySet[Page]:
        if getattr(self, "swagger_fake_view", False):
            return Page.objects.none()
        document = access_document(self.request.user, self.kwargs["pk"])
        return Page.objects.filter(document=document).select_related("document").prefetch_related("images")


class DocumentOriginalView(APIView):
    """The file as uploaded. Byte ranges (`Range: bytes=a-b`) are served, so that a video
    citation opens at its moment (`…/original/#t=65`) and can be scrubbed."""

    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    @extend_schema(
        responses={
            # The file's own type (application/pdf, video/mp4, ...).
            (200, "*/*"): OpenApiTypes.BINARY,
            (206, "*/*"): OpenApiResponse(OpenApiTypes.BINARY, description="The bytes of the `Range` asked for."),
            416: OpenApiResponse(description="The `Range` starts past the end of the file."),
        }
    )
    def get(self, request: Request, pk: int) -> HttpResponseBase:
        document = access_document(request.user, pk)
        with missing_file_is_404():
            size = document.file.size
            wanted = byte_range(request.headers.get("Range", ""), size)
            if wanted is None:
                response: HttpResponseBase = FileResponse(
                    open_stream(document.file.storage, document.file.name),
                    as_attachment=True,
                    filename=document.name,
                    content_type=document.mime,
                )
                response["Content-Length"] = str(size)  # a stream from an object store cannot tell
            elif wanted == UNSATISFIABLE:
                response = HttpResponse(status=416)
                response["Content-Range"] = f"bytes */{size}"
            else:
                start, end = wanted
                # At most MAX_RANGE bytes, fetched as a ranged read (never the whole object).
                data = read_range(document.file.storage, document.file.name, start, end)
                response = HttpResponse(data, status=206, content_type=document.mime)
                response["Content-Range"] = f"bytes {start}-{end}/{size}"
        response["Accept-Ranges"] = "bytes"
        return response


@contextmanager
def missing_file_is_404() -> Iterator[None]:
    """A stored file deleted behind the portal's back (by hand, by a bucket policy) is a
    readable 404, as JSON like the API's other errors, not a 500."""
    try:
        yield
    except FileNotFoundError:
        raise NotFound(_("The stored file is missing; upload the document again.")) from None


UNSATISFIABLE = (-1, -1)
MAX_RANGE = 8 << 20  # bytes sent for one open-ended range; players ask for the rest


def byte_range(header: str, size: int) -> tuple[int, int] | None:
    """(first, last) byte of a single `bytes=` range, clipped to the file; None for no (or an
    unreadable, or a multi-part) range: the whole file; UNSATISFIABLE past its end."""
    match = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", header)
    if not match or not any(match.groups()):
        return None
    first, last = match.groups()
    if not first:  # the last N bytes
        start, end = max(size - int(last), 0), size - 1
    else:
        start = int(first)
        end = min(int(last), size - 1) if last else min(start + MAX_RANGE - 1, size - 1)
    if start >= size or end < start:
        return UNSATISFIABLE
    return start, end


class PageRenderView(APIView):
    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    @extend_schema(responses={(200, "image/png"): OpenApiTypes.BINARY})
    def get(self, request: Request, pk: int) -> FileResponse:
        page = access_page(request.user, pk)
        with missing_file_is_404():
            if not ensure_render(page):
                raise Http404
            return _png(page.render)


class PageImageView(APIView):
    """A picture on a page (embedded image, photo, video frame), by the hash that image and
    frame chunks carry in `location.image`."""

    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    @extend_schema(responses={(200, "image/png"): OpenApiTypes.BINARY})
    def get(self, request: Request, pk: int, sha256: str) -> FileResponse:
        page = access_page(request.user, pk)
        image = PageImage.objects.filter(page=page, sha256=sha256).first()
        if image is None:
            raise Http404
        with missing_file_is_404():
            return _png(image.file)


def _png(stored: FieldFile) -> FileResponse:
    """A stored PNG, streamed; FileNotFoundError (before any byte is sent) when it is gone."""
    return FileResponse(open_stream(stored.storage, stored.name or ""), content_type="image/png")


class CollectionVersionsView(generics.ListAPIView[IndexVersion]):
    """The collection's index versions, newest first (any member may look)."""

    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    serializer_class = IndexVersionSerializer

    def get_queryset(self) -> QuerySet[IndexVersion]:
        if getattr(self, "swagger_fake_view", False):
            return IndexVersion.objects.none()
        collection = access_collection(self.request.user, self.kwargs["collection_id"])
        return IndexVersion.objects.filter(collection=collection).order_by("-number")

    @extend_schema(parameters=[COLLECTION_ID])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)
