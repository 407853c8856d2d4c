"""A collection's golden questions page: anyone who sees the collection reads them; its owner
or team admins add, edit, delete, import and export them, and turn feedback into one."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils.text import slugify
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST, require_safe

from knowledge.access import access_collection, get_or_404
from knowledge.models import Collection
from portal.typing import AuthedRequest
from quality import actions, evaluation, golden
from quality.golden_forms import GoldenForm, keys_text
from quality.models import Feedback, GoldenQuestion

SHOWN_ERRORS = 20


@login_required
def golden_page(request: AuthedRequest, collection_id: int) -> HttpResponse:
    """GET: the list and (for managers) the form; POST: add a question."""
    if request.method == "POST":
        collection = access_collection(request.user, collection_id, manage=True)
        form = GoldenForm(collection, request.POST)
        if form.is_valid():
            try:
                added = actions.do_add_golden(collection, request.user, **form.fields_of())
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                messages.success(request, _("Golden question “%(key)s” added.") % {"key": added.key})
                return redirect("collection-golden", collection.pk)
        return _page(request, collection, form, status=400)
    collection = access_collection(request.user, collection_id)
    return _page(request, collection, GoldenForm(collection))


def _page(request: AuthedRequest, collection: Collection, form: GoldenForm, status: int = 200) -> HttpResponse:
    stale = set(evaluation.questions_of(collection).stale)
    questions = GoldenQuestion.objects.filter(collection=collection).select_related("feedback").order_by("key", "pk")
    context: dict[str, Any] = {
        "collection": collection,
        "can_manage": _can_manage(request, collection),
        "rows": [
            {"golden": question, "stale": question.key in stale, "keys": keys_text(question.keys).replace("\n", "; ")}
            for question in questions
        ],
        "stale_count": len(stale),
        "form": form,
    }
    return render(request, "quality/golden.html", context, status=status)


def _can_manage(request: AuthedRequest, collection: Collection) -> bool:
    return Collection.objects.manageable_by(request.user).filter(pk=collection.pk).exists()


def _golden(request: AuthedRequest, collection_id: int, golden_id: int) -> tuple[Collection, GoldenQuestion]:
    collection = access_collection(request.user, collection_id, manage=True)
    found: GoldenQuestion = get_or_404(GoldenQuestion.objects.filter(collection=collection), golden_id)
    return collection, found


@login_required
def golden_edit(request: AuthedRequest, collection_id: int, golden_id: int) -> HttpResponse:
    collection, question = _golden(request, collection_id, golden_id)
    form = GoldenForm(collection, request.POST or None, golden=question)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                actions.do_update_golden(question, **form.fields_of())
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                messages.success(request, _("Golden question “%(key)s” saved.") % {"key": question.key})
                return redirect("collection-golden", collection.pk)
        status = 400
    context = {"collection": collection, "golden": question, "form": form}
    return render(request, "quality/golden_edit.html", context, status=status)


@login_required
@require_POST
def golden_delete(request: AuthedRequest, collection_id: int, golden_id: int) -> HttpResponse:
    collection, question = _golden(request, collection_id, golden_id)
    actions.do_delete_golden(question)
    messages.success(request, _("Golden question “%(key)s” deleted.") % {"key": question.key})
    return redirect("collection-golden", collection.pk)


@login_required
@require_POST
def golden_import(request: AuthedRequest, collection_id: int) -> HttpResponse:
    """Imports a JSON Lines file and says how it went: back to the list when questions were
    stored, else the page again with status 400 and the reasons."""
    collection = access_collection(request.user, collection_id, manage=True)
    upload = request.FILES.get("file")
    try:
        if upload is None:
            raise ValidationError(_("Choose a JSON Lines file to import."))
        text = golden.read_import(upload)
    except ValidationError as exc:
        result = golden.ImportResult(errors=[(0, " ".join(exc.messages))])
    else:
        result = actions.do_import_golden(collection, request.user, text)
    report(request, result)
    if not result.stored:
        return _page(request, collection, GoldenForm(collection), status=400)
    return redirect("collection-golden", collection.pk)


def report(request: AuthedRequest, result: golden.ImportResult) -> None:
    """What an import did, as messages: the counts, then each bad line's reason."""
    if result.stored or not result.errors:
        messages.success(
            request,
            _("%(imported)d questions added, %(updated)d updated.")
            % {"imported": result.imported, "updated": result.updated},
        )
    for number, error in result.errors[:SHOWN_ERRORS]:
        if number:
            messages.error(request, _("Line %(line)d: %(error)s") % {"line": number, "error": error})
        else:
            messages.error(request, error)
    if len(result.errors) > SHOWN_ERRORS:
        messages.error(
            request,
            _("%(count)d more lines were not imported.") % {"count": len(result.errors) - SHOWN_ERRORS},
        )


@login_required
@require_safe
def golden_export(request: AuthedRequest, collection_id: int) -> HttpResponse:
    collection = access_collection(request.user, collection_id, manage=True)
    return jsonl_response(collection)


def jsonl_response(collection: Collection) -> HttpResponse:
    response = HttpResponse(golden.export_jsonl(collection), content_type="application/x-ndjson; charset=utf-8")
    name = slugify(collection.name) or f"collection-{collection.pk}"
    response["Content-Disposition"] = f'attachment; filename="{name}-golden.jsonl"'
    return response


@login_required
@require_POST
def feedback_to_golden(request: AuthedRequest, feedback_id: int) -> HttpResponse:
    """ "Turn into a test": the feedback (one the caller may see) as a golden question of the
    collection posted (one its answer searched and the caller manages; the only one where
    the answer searched one)."""
    feedback: Feedback = get_or_404(Feedback.objects.visible_to(request.user), feedback_id)
    chosen = request.POST.get("collection") or _only_collection(feedback)
    collection = access_collection(request.user, chosen, manage=True)
    try:
        made = actions.do_golden_from_feedback(feedback, collection, request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect("collection-golden", collection.pk)
    messages.success(request, _("The question is now the golden question “%(key)s”.") % {"key": made.key})
    return redirect(reverse("collection-golden", args=[collection.pk]) + f"#golden-{made.pk}")


def _only_collection(feedback: Feedback) -> str:
    ids = list(feedback.collections.values_list("pk", flat=True)[:2])
    return str(ids[0]) if len(ids) == 1 else ""


urlpatterns = [
    path("collections/<int:collection_id>/golden/", golden_page, name="collection-golden"),
    path("collections/<int:collection_id>/golden/import/", golden_import, name="collection-golden-import"),
    path("collections/<int:collection_id>/golden/export/", golden_export, name="collection-golden-export"),
    path("collections/<int:collection_id>/golden/<int:golden_id>/edit/", golden_edit, name="golden-edit"),
    path("collections/<int:collection_id>/golden/<int:golden_id>/delete/", golden_delete, name="golden-delete"),
    path("feedback/<int:feedback_id>/to-golden/", feedback_to_golden, name="feedback-to-golden"),
]
