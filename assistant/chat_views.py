"""The chat page (/chat/, /chat/<id>/): the user's conversations, a composer, and the stored
turns of one conversation. Answers stream over /ws/chat/ (static/portal/chat.js); this view
only renders what is stored, so a reload shows the same answer with the same citations."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import pgettext
from django.views.decorators.http import require_GET, require_POST

from assistant import hooks
from assistant.access import access_conversation
from assistant.answering.answer import CITATION
from assistant.answering.decisions import REASONS
from assistant.models import Conversation, Message
from knowledge.models import Collection, Page
from portal.typing import AuthedRequest

CONVERSATIONS_SHOWN = 100  # the newest; older ones stay reachable through the API


@dataclass(frozen=True)
class Turn:
    """One stored message as the page shows it: an answer's text with its [n] marks as buttons."""

    message: Message
    html: SafeString
    error: str
    # The user's own feedback on an answer (quality registers it: assistant/hooks.py).
    feedback: dict[str, Any] | None = None

    @property
    def rateable(self) -> bool:
        """A finished answer takes a thumbs up or down; one that stopped early does not."""
        return self.message.role == Message.Role.ASSISTANT and not self.message.error and hooks.feedback_enabled()

    @property
    def searched_ids(self) -> str:
        """The ids of the collections the answer searched, for the correction's document list."""
        return ",".join(str(collection["id"]) for collection in self.message.searched if "id" in collection)

    @property
    def searched(self) -> str:
        """The collections the answer searched, by name (stored answers have them since
        issue 21; older ones show nothing)."""
        return ", ".join(str(collection.get("name", "")) for collection in self.message.searched)


@login_required
@require_GET
def chat(request: AuthedRequest, conversation_id: int | None = None) -> HttpResponse:
    conversation = access_conversation(request.user, conversation_id) if conversation_id else None
    stored = _messages(conversation) if conversation else []
    answers = [message.pk for message in stored if message.role == Message.Role.ASSISTANT]
    given = hooks.answer_feedback(request.user, answers)
    turns = [_turn(message, given.get(message.pk)) for message in stored]
    checked = set(conversation.collections.values_list("pk", flat=True)) if conversation else set()
    context = {
        "conversation": conversation,
        "conversations": Conversation.objects.visible_to(request.user)[:CONVERSATIONS_SHOWN],
        "collections": Collection.objects.visible_to(request.user).order_by("name"),
        "checked": checked,
        "turns": turns,
        "citations": {str(turn.message.pk): turn.message.citations for turn in turns},
        "found": {str(message.pk): _found(message) for message in stored if message.role == Message.Role.ASSISTANT},
        "strings": _strings(),
        "feedback_enabled": hooks.feedback_enabled(),
    }
    return render(request, "assistant/chat.html", context)


@login_required
@require_POST
def chat_delete(request: AuthedRequest, conversation_id: int) -> HttpResponse:
    conversation = access_conversation(request.user, conversation_id)
    conversation.delete()
    messages.success(request, _("Conversation deleted."))
    return redirect("chat")


def _messages(conversation: Conversation) -> list[Message]:
    """The conversation's messages, their citations given the page sizes that the bbox
    highlight needs (answers stored before citations carried them)."""
    stored = list(conversation.messages.all())
    missing = {
        cited["page_id"]
        for message in stored
        for cited in message.citations
        if "page_width" not in cited and cited.get("page_id")
    }
    if missing:
        sizes = {pk: (w, h) for pk, w, h in Page.objects.filter(pk__in=missing).values_list("pk", "width", "height")}
        for message in stored:
            for cited in message.citations:
                if "page_width" not in cited:
                    cited["page_width"], cited["page_height"] = sizes.get(cited.get("page_id"), (None, None))
    return stored


def _found(message: Message) -> dict[str, Any]:
    """How a stored answer was found, for chat.js to draw as it drew it live: the evidence
    shown before the answer, the decisions, the answer's mode and a declined answer's
    closest passages (empty for answers stored before they were kept)."""
    return {
        "evidence": message.evidence,
        "decisions": message.decisions,
        "mode": message.mode,
        "closest": message.closest,
        "abstain": bool(message.abstain),
    }


def _turn(message: Message, feedback: dict[str, Any] | None = None) -> Turn:
    return Turn(message=message, html=linked(message.content), error=_readable_error(message.error), feedback=feedback)


def linked(text: str) -> SafeString:
    """The answer's text, escaped, with each [n] (or [1, 2], 【1】) as a button that opens
    source n; static/portal/chat.js does the same to streamed text."""
    parts: list[str] = []
    position = 0
    for match in CITATION.finditer(text):
        parts.append(escape(text[position : match.start()]))
        parts.extend(_citation_button(int(number)) for number in re.split(r"[,，、]", match.group(1)))
        position = match.end()
    parts.append(escape(text[position:]))
    return mark_safe("".join(parts))  # noqa: S308 (every part is escaped above)


def _citation_button(number: int) -> str:
    label = _("Source %(n)d") % {"n": number}
    return format_html(
        '<button type="button" class="citation-link" data-n="{}" aria-label="{}">[{}]</button>', number, label, number
    )


def _readable_error(error: str) -> str:
    """Why a stored answer stopped early, as the page says it (Message.error keeps a code or
    the model's own message)."""
    if not error:
        return ""
    known = {
        "cancelled": _("Cancelled: the answer stopped here."),
        "disconnected": _("The connection closed before the answer was finished."),
        "timeout": _("The answer made no progress and was stopped."),
        "internal error": _("Something went wrong while answering; the error is in the portal's log."),
    }
    return known.get(error, _("The answer stopped early: %(error)s") % {"error": error})


def _strings() -> dict[str, Any]:
    """What chat.js says, translated here (the page passes it with json_script)."""
    return {
        "strategies": dict(Message.Strategy.choices),
        "strategy": _("Strategy: %(strategy)s"),
        "by_rules": _("(chosen by rules)"),
        "rewrite": _("Searched for: %(query)s"),
        "searched": _("Collections searched: %(collections)s"),
        "searched_none": _("No collection with indexed documents was searched."),
        "searching": _("searching…"),
        "no_hits": _("nothing found"),
        "queued": _("Waiting for the model…"),
        "thinking": _("Working on it…"),
        "cancelled": _("Cancelled: the answer stopped here."),
        "dropped": _("The connection dropped; the answer stopped here."),
        "offline": _("Not connected; reconnecting…"),
        "logged_out": _("You are logged out. Log in again to ask questions."),
        "copied": _("Copied"),
        "copy_failed": _("Could not copy; select the text instead."),
        "source": _("Source %(n)d"),
        "not_cited": _("The answer did not use source %(n)d."),
        "no_picture": _("No picture of this page."),
        "whole_page": _("Whole page"),
        "zoom_in": _("Zoom to the passage"),
        "inferred": _("used without a citation mark"),
        "feedback_saved": _("Thank you: your feedback is saved."),
        "feedback_removed": _("Your feedback is removed."),
        "feedback_failed": _("Your feedback could not be saved: %(error)s"),
        "feedback_rate_first": _("Choose thumbs up or down first."),
        "feedback_cited": _("Cited in this answer"),
        "feedback_no_document": _("No document"),
        "feedback_loading": _("Loading the documents…"),
        "feedback_pages": _("%(name)s (%(count)d pages)"),
        # The evidence shown before the answer, and "how it was found" under it.
        "evidence": _("Evidence"),
        "evidence_step": _("Evidence for step %(step)d"),
        "confidence": _("confidence %(confidence)s"),
        "evidence_open": _("Open the passage: %(file)s, %(place)s"),
        "seconds": _("%(seconds)s s"),
        "mode": _("How the answer was made: %(mode)s"),
        "modes": {
            "evidence": _("quoting the evidence"),
            "confirm": _("quoting the evidence the model confirmed"),
            "choose": _("the model chose among the quotes"),
            "phrase": _("the model phrased the evidence"),
            "passages": _("the model read the passages"),
        },
        # Decisions' stages and outcomes are codes (assistant/answering/decisions.py).
        "decision_stages": {
            "retrieve": pgettext("answer stage", "search"),
            "cells": pgettext("answer stage", "table cells"),
            "read": pgettext("answer stage", "reading"),
            "anchors": pgettext("answer stage", "anchors"),
            "decide": pgettext("answer stage", "decision"),
            "choose": pgettext("answer stage", "choosing"),
            "phrase": pgettext("answer stage", "phrasing"),
            "write": pgettext("answer stage", "writing"),
            "verify": pgettext("answer stage", "checking"),
            "attach": pgettext("answer stage", "pictures"),
        },
        "decision_outcomes": {
            "answer": pgettext("answer decision", "answer"),
            "decline": pgettext("answer decision", "decline"),
            "found": pgettext("answer decision", "found"),
        },
        # Why an answer declined: the reason codes analytics counts.
        "decision_reasons": {reason: str(text) for reason, text in REASONS.items()},
    }
