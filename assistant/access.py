"""The assistant's permission-checked fetches, beside knowledge's (knowledge/access.py):
what the user may not see is a 404."""

from __future__ import annotations

from typing import TYPE_CHECKING

from assistant.models import Conversation, Message
from knowledge.access import get_or_404

if TYPE_CHECKING:
    from portal.typing import AnyUser


def access_conversation(user: AnyUser, conversation_id: int | str) -> Conversation:
    """The user's own conversation; anyone else's does not exist (a conversation is its
    user's alone: not their team's, not an admin's)."""
    conversation: Conversation = get_or_404(Conversation.objects.visible_to(user), conversation_id)
    return conversation


def access_message(user: AnyUser, message_id: int | str) -> Message:
    """One message of the user's own conversations (rating or correcting an answer); by the
    same rule, anyone else's does not exist."""
    message: Message = get_or_404(
        Message.objects.filter(conversation__in=Conversation.objects.visible_to(user)).select_related("conversation"),
        message_id,
    )
    return message
