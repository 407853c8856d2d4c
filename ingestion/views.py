"""Pages that start ingestion: uploading files to a collection and indexing a document again
(form posts from the collection and document pages, which are knowledge's)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from ingestion import actions
from knowledge.access import access_collection, access_document
from portal.limits import upload_refused
from portal.typing import AuthedRequest


@login_required
@require_POST
def collection_upload(request: AuthedRequest, collection_id: int) -> HttpResponse:
    collection = access_collection(request.user, collection_id, write=True)
    files = request.FILES.getlist("files")
    if not files:
        messages.error(request, _("Choose one or more files to upload."))
    elif refused := upload_refused(request.user.pk, len(files)):
        messages.error(request, refused)
        files = []
    for added in actions.do_add_documents(collection, files):
        if added.error:
            messages.error(request, added.error)
        elif added.run is None:
            messages.info(request, _("“%(name)s” is unchanged.") % {"name": added.name})
        else:
            messages.success(request, _("“%(name)s” uploaded; indexing has started.") % {"name": added.name})
    return redirect("collection", collection.pk)


@login_required
@require_POST
def document_rerun(request: AuthedRequest, document_id: int) -> HttpResponse:
    document = access_document(request.user, document_id, write=True)
    try:
        actions.do_rerun_document(document, if_idle=True)
    except actions.AlreadyIndexingError:
        messages.info(request, _("“%(name)s” is already being indexed.") % {"name": document.name})
    else:
        messages.success(request, _("“%(name)s” is being indexed again.") % {"name": document.name})
    return redirect("collection", document.collection_id)
