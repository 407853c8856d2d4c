"""The API's writes that start ingestion: uploading files (multipart, many at once), adding a
video link, indexing a document again, and a collection's index versions (reindex, roll back,
activate one). Reading documents, pages and versions is knowledge's (knowledge/api/documents.py);
the collection's list is served here, with each document's last run."""

from __future__ import annotations

import html
import unicodedata
from collections.abc import Callable
from typing import Any

from django.db.models import Prefetch, QuerySet
from django.http import Http404
from django.http.multipartparser import MultiPartParser as DjangoMultiPartParser
from django.http.multipartparser import MultiPartParserError
from django.urls import reverse
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import parsers, serializers, status
from rest_framework.exceptions import ParseError, Throttled
from rest_framework.parsers import DataAndFiles, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ingestion import actions
from ingestion.api.serializers import LINK_RESULT, UPLOAD_RESULT, VideoLinkSerializer
from ingestion.models import IngestionRun
from knowledge.access import access_collection, access_document
from knowledge.actions import BIDI_CONTROLS
from knowledge.api.documents import COLLECTION_ID, CollectionDocumentsView
from knowledge.api.schema import THROTTLED
from knowledge.api.serializers import (
    DocumentRunSerializer,
    IndexVersionSerializer,
    newest_ingest_runs,
    with_pages_done,
)
from knowledge.api.views import request_user
from knowledge.models import Collection, Document, IndexVersion
from portal.limits import upload_refused


class _NamesKept(DjangoMultiPartParser):
    def sanitize_file_name(self, file_name: str) -> str | None:
        """Django removes every non-printable character from an uploaded file's name and drops
        a file whose name is then empty, silently: a name holding U+202E would be stored renamed
        without it, a name of only U+200B not at all. Such a name is kept as sent, so that the
        portal's own rule (knowledge.actions.clean_document_path) refuses it with its reason."""
        sent = html.unescape(file_name).rsplit("/")[-1].rsplit("\\")[-1]
        sent = "".join(char for char in sent if unicodedata.category(char) != "Cc")  # NUL is never kept
        visible = any(char.isprintable() and not char.isspace() for char in sent)
        if any(char in BIDI_CONTROLS for char in sent) or (sent and not visible):
            return sent
        name: str | None = super().sanitize_file_name(file_name)
        return name


class UploadParser(MultiPartParser):
    """DRF's multipart parser with the file names kept where the portal refuses them."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> DataAndFiles:
        context = parser_context or {}
        request = context["request"]
        meta = {**request.META, "CONTENT_TYPE": media_type}
        try:
            encoding = parsers.get_encoding(context)  # type: ignore[attr-defined]  # not in the stubs
            data, files = _NamesKept(meta, stream, request.upload_handlers, encoding).parse()
        except MultiPartParserError as exc:
            raise ParseError(f"Multipart form parse error - {exc}") from None
        return DataAndFiles(data, files)


class DocumentUploadView(CollectionDocumentsView):
    """GET: the collection's documents. POST (editors): upload files (multipart `files`)."""

    # GET is knowledge's view; this class adds the upload and serves the route (api/urls.py).
    parser_classes = [UploadParser]

    def get_queryset(self) -> QuerySet[Document]:
        # Each document's last run in one more query, whatever the page's length.
        last_runs = Prefetch("runs", newest_ingest_runs(IngestionRun.objects.all()), to_attr="last_runs")
        return super().get_queryset().prefetch_related(last_runs)

    @extend_schema(
        parameters=[COLLECTION_ID],
        request={
            "multipart/form-data": {
                "type": "object",
                "properties": {
                    "files": {"type": "array", "items": {"type": "string", "format": "binary"}, "minItems": 1}
                },
                "required": ["files"],
            }
        },
        responses={
            201: UPLOAD_RESULT,
            400: OpenApiResponse(
                {
                    "oneOf": [
                        {"type": "array", "items": {"$ref": "#/components/schemas/UploadResult"}},
                        {"type": "object"},
                    ]
                },
                description="No file could be stored (each file's `error`), or no `files` were sent.",
            ),
            429: THROTTLED,
        },
    )
    def post(self, request: Request, collection_id: int) -> Response:
        collection = access_collection(request.user, collection_id, write=True)
        files = request.FILES.getlist("files")
        if not files:
            return Response({"detail": ["Send the files as multipart field “files”."]}, status=400)
        refused = upload_refused(request_user(request).pk, len(files))
        if refused:
            raise Throttled(detail=refused)
        results = [
            {
                "name": added.name,
                "document": added.document.pk if added.document else None,
                "run": added.run.pk if added.run else None,
                "unchanged": added.document is not None and added.run is None,
                "error": added.error,
            }
            for added in actions.do_add_documents(collection, files)
        ]
        ok = any(not result["error"] for result in results)
        return Response(results, status=status.HTTP_201_CREATED if ok else status.HTTP_400_BAD_REQUEST)


class CollectionLinksView(APIView):
    """POST (editors): add a link to a video kept elsewhere (URL, title, description); its
    title and description become searchable and answers cite the URL."""

    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    @extend_schema(parameters=[COLLECTION_ID], request=VideoLinkSerializer, responses={201: LINK_RESULT})
    def post(self, request: Request, collection_id: int) -> Response:
        collection = access_collection(request.user, collection_id, write=True)
        form = VideoLinkSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        document, run = actions.do_add_video_link(collection, data["url"], data["title"], data["description"])
        result = {
            "name": document.name,
            "document": document.pk,
            "run": run.pk if run else None,
            "unchanged": run is None,
            "error": "",
        }
        return Response(result, status=status.HTTP_201_CREATED)


RERUN_CONFLICT = inline_serializer("RerunConflict", {"detail": serializers.CharField(), "run": DocumentRunSerializer()})


class DocumentRerunView(APIView):
    """POST (editors): index the document again, as the page's Re-run button does (pages still
    valid are kept). 202 with the new run; the document's `last_run` then follows it
    (`Location`). A document already queued or being indexed is not queued twice: 409, with
    that run."""

    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    @extend_schema(
        request=None,
        responses={
            202: OpenApiResponse(DocumentRunSerializer, description="Queued; `Location` is the document."),
            409: OpenApiResponse(RERUN_CONFLICT, description="Already queued or being indexed: that run."),
        },
    )
    def post(self, request: Request, pk: int) -> Response:
        document = access_document(request.user, pk, write=True)
        try:
            run = actions.do_rerun_document(document, if_idle=True)
        except actions.AlreadyIndexingError as busy:
            detail = _("“%(name)s” is already being indexed.") % {"name": document.name}
            return Response({"detail": detail, "run": _shown(busy.run)}, status=status.HTTP_409_CONFLICT)
        headers = {"Location": reverse("document-detail", args=[document.pk])}
        return Response(_shown(run), status=status.HTTP_202_ACCEPTED, headers=headers)


def _shown(run: IngestionRun) -> dict[str, Any]:
    return DocumentRunSerializer(with_pages_done(IngestionRun.objects.filter(pk=run.pk)).get()).data


class VersionActionView(APIView):
    """Owners and team admins: `reindex` builds a new version, `rollback` returns to the
    previous one, `activate` flips to a kept version by number."""

    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    action_name = ""  # a key of ACTIONS: each is an action of ingestion/actions.py

    @extend_schema(parameters=[COLLECTION_ID], request=None, responses={200: IndexVersionSerializer})
    def post(self, request: Request, collection_id: int, number: int | None = None) -> Response:
        collection = access_collection(request.user, collection_id, manage=True)
        version = ACTIONS[self.action_name](collection, number)
        return Response(IndexVersionSerializer(version).data)


def _kept_version(collection: Collection, number: int | None) -> IndexVersion:
    found = IndexVersion.objects.filter(collection=collection, number=number or 0).first()
    if found is None:
        raise Http404
    return found


ACTIONS: dict[str, Callable[[Collection, int | None], IndexVersion]] = {
    "reindex": lambda collection, _number: actions.do_reindex(collection),
    "rollback": lambda collection, _number: actions.do_roll_back(collection),
    "activate": lambda collection, number: actions.do_activate_version(_kept_version(collection, number)),
}
