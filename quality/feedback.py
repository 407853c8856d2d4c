"""People's feedback on answers: a thumbs up or down on an answer of their own conversation,
with an optional comment or correction ("the right answer is … on page … of …"), kept with a
snapshot of what the answer was made of (question, citations, strategy, timings, the index
versions searched and the models used), so the verdict still means something after the
message, the index or the models change (docs/quality.md). The writes are
quality.actions.do_give_feedback and do_delete_feedback."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from assistant.models import Message
from knowledge.models import Collection, Document
from portal.typing import AnyUser
from quality.models import Feedback

# The parts of a citation worth keeping: enough to find the page again and to judge retrieval.
CITATION_FIELDS = ("file", "path", "page", "document_id", "collection_id", "chunk_id", "score")


def feedback_on(user: AnyUser, message: Message) -> Feedback | None:
    """The user's feedback on one of their answers, if they gave any."""
    return Feedback.objects.filter(message=message, user=user.pk).first()


def feedback_by_message(user: AnyUser, message_ids: Sequence[int]) -> dict[int, Feedback]:
    """The user's own feedback on these messages, by message id (the chat page's answers)."""
    if not user.is_authenticated or not message_ids:
        return {}
    rows = Feedback.objects.filter(user=user, message_id__in=message_ids).select_related("correct_document")
    return {feedback.message_id: feedback for feedback in rows if feedback.message_id is not None}


def answer_feedback(user: AnyUser, message_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """The chat page's view of feedback_by_message (registered in assistant/hooks.py)."""
    return {
        message_id: {
            "rating": feedback.rating,
            "comment": feedback.comment,
            "correct_answer": feedback.correct_answer,
            "correct_document": feedback.correct_document_id,
            "correct_document_name": feedback.correct_document.name if feedback.correct_document else "",
            "correct_page": feedback.correct_page,
        }
        for message_id, feedback in feedback_by_message(user, message_ids).items()
    }


def searched_ids(message: Message) -> list[int]:
    """The ids of the collections the answer searched (message.searched)."""
    ids: list[int] = []
    for entry in message.searched:
        if isinstance(entry, dict) and isinstance(entry.get("id"), int):
            ids.append(entry["id"])
    return ids


def check_rateable(message: Message) -> None:
    if message.role != Message.Role.ASSISTANT:
        raise ValidationError(_("Only answers can be rated, not questions."))
    if message.error:
        raise ValidationError(
            _("This answer stopped before it was finished, so it cannot be rated. Ask the question again.")
        )


def check_correction(
    user: AnyUser, message: Message, document: Document | int | None, page: int | None
) -> Document | None:
    """The right document of a correction: one the user can see, in a collection the answer
    searched; the page within the document's pages when the count is known."""
    if document is None:
        if page is not None:
            raise ValidationError({"correct_page": [_("Choose the document the right page is in.")]})
        return None
    document_id = document.pk if isinstance(document, Document) else document
    visible = Collection.objects.visible_to(user).filter(pk__in=searched_ids(message)).values("pk")
    found = Document.objects.filter(pk=document_id, collection__in=visible).first()
    if found is None:
        raise ValidationError(
            {"correct_document": [_("Choose a document of the collections this answer searched (and you can see).")]}
        )
    if page is not None:
        if page < 1:
            raise ValidationError({"correct_page": [_("The page must be 1 or more.")]})
        if found.page_count and page > found.page_count:
            raise ValidationError(
                {
                    "correct_page": [
                        _("%(name)s has %(count)d pages: choose a page from 1 to %(count)d.")
                        % {"name": found.name, "count": found.page_count}
                    ]
                }
            )
    return found


def question_before(message: Message) -> str:
    """The user's question the answer answers: the last user message before it."""
    asked = (
        Message.objects.filter(conversation_id=message.conversation_id, role=Message.Role.USER, pk__lt=message.pk)
        .order_by("-pk")
        .values_list("content", flat=True)
        .first()
    )
    return asked or ""


def snapshot_of(message: Message) -> dict[str, Any]:
    """What made the answer, kept with the feedback: readable when the message goes."""
    return {
        "question": question_before(message),
        "answer": message.content,
        "citations": compact_citations(message.citations),
        "strategy": message.strategy,
        "abstain": message.abstain,
        "timings": message.timings,
        "versions": versions_of(message),
        "models_used": message.models_used,
    }


def compact_citations(citations: list[Any]) -> list[dict[str, Any]]:
    return [
        {key: cited.get(key) for key in CITATION_FIELDS if key in cited}
        for cited in citations
        if isinstance(cited, dict)
    ]


def versions_of(message: Message) -> list[dict[str, Any]]:
    return [
        {"collection": entry.get("id"), "version": entry.get("version")}
        for entry in message.searched
        if isinstance(entry, dict)
    ]
