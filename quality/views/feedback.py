"""The feedback pages: a collection's (for its owner and team admins: the feedback on answers
that searched it, each with what the answer was made of and a button that turns it into a
golden question), and the user's own (/feedback/, linking back to the conversations)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import path
from django.utils.translation import gettext as _
from django.views.decorators.http import require_safe

from assistant.models import Message
from knowledge.access import access_collection
from knowledge.models import Collection
from portal.typing import AuthedRequest
from quality.models import Feedback

PER_PAGE = 25
STRATEGIES = dict(Message.Strategy.choices)


def _rating(request: AuthedRequest) -> str:
    rating = request.GET.get("rating", "")
    return rating if rating in Feedback.Rating.values else ""


def _items(feedback: QuerySet[Feedback], request: AuthedRequest, visible: set[int]) -> dict[str, Any]:
    """One page of feedback, each item with what the reader may see of its snapshot."""
    page = Paginator(feedback, PER_PAGE).get_page(request.GET.get("page"))
    return {"page": page, "items": [_item(entry, request, visible) for entry in page.object_list]}


def _item(feedback: Feedback, request: AuthedRequest, visible: set[int]) -> dict[str, Any]:
    """An item as the page shows it. Someone else's answer may have searched collections the
    reader cannot see too: only the citations and versions of visible ones are shown."""
    own = feedback.user_id == request.user.pk
    citations = [cited for cited in feedback.citations if own or cited.get("collection_id") in visible]
    names = {collection.pk: collection.name for collection in feedback.collections.all()}
    versions = [
        {"name": names.get(entry.get("collection"), ""), "version": entry.get("version")}
        for entry in feedback.versions
        if own or entry.get("collection") in visible
    ]
    facts = []
    if feedback.strategy:
        facts.append(_("Strategy: %(strategy)s") % {"strategy": STRATEGIES.get(feedback.strategy, feedback.strategy)})
    if versions:
        listed = ", ".join(f"{entry['name']} v{entry['version'] or '?'}" for entry in versions)
        facts.append(_("Index versions: %(versions)s") % {"versions": listed})
    if feedback.models_used:
        listed = ", ".join(f"{role} {model}" for role, model in sorted(feedback.models_used.items()))
        facts.append(_("Models: %(models)s") % {"models": listed})
    seconds = feedback.timings.get("total") if isinstance(feedback.timings, dict) else None
    if isinstance(seconds, int | float):
        facts.append(_("%(seconds).1f s") % {"seconds": seconds})
    document = feedback.correct_document
    shown_document = document if document and (own or document.collection_id in visible) else None
    return {
        "feedback": feedback,
        "own": own,
        "citations": citations,
        "versions": versions,
        "correct_document": shown_document,
        "facts": facts,
        "conversation_id": feedback.message.conversation_id if own and feedback.message else None,
    }


def _feedbacks() -> QuerySet[Feedback]:
    return (
        Feedback.objects.select_related("user", "message", "correct_document")
        .prefetch_related("collections")
        .order_by("-created_at", "-pk")
    )


@login_required
@require_safe
def collection_feedback(request: AuthedRequest, collection_id: int) -> HttpResponse:
    collection = access_collection(request.user, collection_id, manage=True)
    rating = _rating(request)
    feedback = _feedbacks().filter(collections=collection)
    if rating:
        feedback = feedback.filter(rating=rating)
    visible = set(Collection.objects.visible_to(request.user).values_list("pk", flat=True))
    context = {
        "collection": collection,
        "rating": rating,
        "ratings": Feedback.Rating.choices,
        **_items(feedback, request, visible),
    }
    return render(request, "quality/feedback.html", context)


@login_required
@require_safe
def my_feedback(request: AuthedRequest) -> HttpResponse:
    rating = _rating(request)
    feedback = _feedbacks().filter(user=request.user)
    if rating:
        feedback = feedback.filter(rating=rating)
    visible = set(Collection.objects.visible_to(request.user).values_list("pk", flat=True))
    context = {"rating": rating, "ratings": Feedback.Rating.choices, **_items(feedback, request, visible)}
    return render(request, "quality/my_feedback.html", context)


urlpatterns = [
    path("collections/<int:collection_id>/feedback/", collection_feedback, name="collection-feedback"),
    path("feedback/", my_feedback, name="my-feedback"),
]
