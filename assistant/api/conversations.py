"""/api/conversations/: the caller's own conversations, with their messages; deletable."""

from __future__ import annotations

from django.db.models import QuerySet
from rest_framework import mixins, viewsets

from assistant.access import access_conversation
from assistant.api.serializers import ConversationDetailSerializer, ConversationSerializer
from assistant.models import Conversation


class ConversationViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet[Conversation],
):
    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    def get_queryset(self) -> QuerySet[Conversation]:
        conversations = Conversation.objects.visible_to(self.request.user).prefetch_related("collections")
        if self.action == "retrieve":
            conversations = conversations.prefetch_related("messages")
        return conversations

    def get_object(self) -> Conversation:
        return access_conversation(self.request.user, self.kwargs["pk"])

    def get_serializer_class(self) -> type[ConversationSerializer]:
        return ConversationDetailSerializer if self.action == "retrieve" else ConversationSerializer
