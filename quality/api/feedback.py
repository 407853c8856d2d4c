"""Feedback on answers: `/api/messages/<id>/feedback/` is the caller's own verdict on one of
their answers (read, give or replace, change, withdraw); `/api/feedback/` lists the feedback
the caller may read: their own, and the feedback on answers that searched a collection they
manage (its owner, or an admin of its team)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.urls import path
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from assistant.access import access_message
from knowledge.api.views import request_user
from knowledge.models import Collection
from portal.typing import AnyUser
from quality import actions
from quality.models import Feedback

MESSAGE_ID = OpenApiParameter(
    "message_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="The answer's id (a message of yours)."
)
MAX_TEXT = 10_000
ID = {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}


class CompactCitationSerializer(serializers.Serializer[dict[str, Any]]):
    file = serializers.CharField()
    path = serializers.CharField(required=False)
    page = serializers.IntegerField(required=False)
    document_id = serializers.IntegerField(required=False)
    collection_id = serializers.IntegerField(required=False)
    chunk_id = serializers.IntegerField(required=False)
    score = serializers.FloatField(required=False)


class VersionSerializer(serializers.Serializer[dict[str, Any]]):
    collection = serializers.IntegerField(allow_null=True)
    version = serializers.IntegerField(allow_null=True)


class FeedbackSerializer(serializers.ModelSerializer[Feedback]):
    """One verdict with its snapshot. Read by someone other than its author (a collection
    admin), the citations, versions and collections are only those of collections the
    reader may see."""

    conversation = serializers.SerializerMethodField(help_text="The conversation, for the author only.")
    mine = serializers.SerializerMethodField()
    user = serializers.SerializerMethodField(help_text="Who gave it: their email or user name.")
    correct_document_name = serializers.SerializerMethodField()
    citations = serializers.SerializerMethodField()
    versions = serializers.SerializerMethodField()
    collections = serializers.SerializerMethodField()

    class Meta:
        model = Feedback
        fields = [
            "id", "message", "conversation", "mine", "user", "rating", "comment", "correct_answer",
            "correct_document", "correct_document_name", "correct_page", "question", "answer", "citations",
            "strategy", "abstain", "timings", "versions", "models_used", "collections", "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = fields

    def _reader(self) -> AnyUser:
        return self.context["request"].user

    def _visible(self) -> set[int]:
        """The collections the reader may see (computed once per response)."""
        if "visible" not in self.context:
            self.context["visible"] = set(Collection.objects.visible_to(self._reader()).values_list("pk", flat=True))
        visible: set[int] = self.context["visible"]
        return visible

    def _own(self, feedback: Feedback) -> bool:
        return feedback.user_id == self._reader().pk

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_conversation(self, feedback: Feedback) -> int | None:
        if not self._own(feedback) or feedback.message is None:
            return None
        return feedback.message.conversation_id

    def get_mine(self, feedback: Feedback) -> bool:
        return self._own(feedback)

    def get_user(self, feedback: Feedback) -> str:
        return str(feedback.user)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_correct_document_name(self, feedback: Feedback) -> str | None:
        document = feedback.correct_document
        if document is None or (not self._own(feedback) and document.collection_id not in self._visible()):
            return None
        return document.name

    @extend_schema_field(CompactCitationSerializer(many=True))
    def get_citations(self, feedback: Feedback) -> list[dict[str, Any]]:
        if self._own(feedback):
            return feedback.citations
        return [cited for cited in feedback.citations if cited.get("collection_id") in self._visible()]

    @extend_schema_field(VersionSerializer(many=True))
    def get_versions(self, feedback: Feedback) -> list[dict[str, Any]]:
        if self._own(feedback):
            return feedback.versions
        return [entry for entry in feedback.versions if entry.get("collection") in self._visible()]

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_collections(self, feedback: Feedback) -> list[int]:
        ids = [collection.pk for collection in feedback.collections.all()]
        return ids if self._own(feedback) else [pk for pk in ids if pk in self._visible()]

    def to_representation(self, instance: Feedback) -> dict[str, Any]:
        data: dict[str, Any] = super().to_representation(instance)
        if data["correct_document_name"] is None:  # a document the reader may not see: no id either
            data["correct_document"] = None
        return data


class FeedbackInputSerializer(serializers.Serializer[dict[str, Any]]):
    rating = serializers.ChoiceField(choices=Feedback.Rating.choices, help_text="up (helpful) or down.")
    comment = serializers.CharField(required=False, allow_blank=True, max_length=MAX_TEXT, default="")
    correct_answer = serializers.CharField(
        required=False, allow_blank=True, max_length=MAX_TEXT, default="", help_text="The right answer, in words."
    )
    correct_document = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        default=None,
        help_text="The id of the document the right answer is in: one of the collections the answer searched.",
    )
    correct_page = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        default=None,
        help_text="Its page, slide or minute (1 is the first); needs `correct_document`.",
    )


class FeedbackPatchSerializer(FeedbackInputSerializer):
    """The fields of a PATCH: any of them; the others keep their values."""

    rating = serializers.ChoiceField(choices=Feedback.Rating.choices, required=False)


def _readable(exc: DjangoValidationError) -> ValidationError:
    """A ValidationError of quality.feedback as DRF's: messages by field where it named one."""
    if hasattr(exc, "error_dict"):
        return ValidationError(exc.message_dict)
    return ValidationError({"detail": exc.messages})


def _feedbacks() -> QuerySet[Feedback]:
    return Feedback.objects.select_related("user", "message", "correct_document").prefetch_related("collections")


class MessageFeedbackView(generics.GenericAPIView[Feedback]):
    """The caller's feedback on one of their answers. PUT gives or replaces it (201 when new),
    PATCH changes some of its fields, DELETE withdraws it. Only finished answers (no error)
    can be rated; a correction's document must be in a collection the answer searched."""

    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    serializer_class = FeedbackSerializer

    def get_queryset(self) -> QuerySet[Feedback]:
        return _feedbacks().filter(user=self.request.user.pk)

    def _existing(self, request: Request, message_id: int) -> tuple[Any, Feedback | None]:
        message = access_message(request_user(request), message_id)
        return message, self.get_queryset().filter(message=message).first()

    def _answer(self, feedback: Feedback, code: int = status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=feedback.pk)
        return Response(self.get_serializer(fresh).data, status=code)

    def _save(self, request: Request, message: Any, data: dict[str, Any]) -> Feedback:
        try:
            return actions.do_give_feedback(request_user(request), message, **data)
        except DjangoValidationError as exc:
            raise _readable(exc) from None

    @extend_schema(parameters=[MESSAGE_ID])
    def get(self, request: Request, message_id: int) -> Response:
        _message, feedback = self._existing(request, message_id)
        if feedback is None:
            raise NotFound(_("You have not given feedback on this answer."))
        return self._answer(feedback)

    @extend_schema(
        parameters=[MESSAGE_ID],
        request=FeedbackInputSerializer,
        responses={200: FeedbackSerializer, 201: FeedbackSerializer},
    )
    def put(self, request: Request, message_id: int) -> Response:
        message, existing = self._existing(request, message_id)  # access before validation: 404, not 400
        given = FeedbackInputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        feedback = self._save(request, message, dict(given.validated_data))
        return self._answer(feedback, status.HTTP_200_OK if existing else status.HTTP_201_CREATED)

    @extend_schema(parameters=[MESSAGE_ID], request=FeedbackPatchSerializer, responses={200: FeedbackSerializer})
    def patch(self, request: Request, message_id: int) -> Response:
        message, existing = self._existing(request, message_id)
        if existing is None:
            raise NotFound(_("You have not given feedback on this answer yet: PUT gives it."))
        given = FeedbackPatchSerializer(data=request.data, partial=True)
        given.is_valid(raise_exception=True)
        data = {
            "rating": existing.rating,
            "comment": existing.comment,
            "correct_answer": existing.correct_answer,
            "correct_document": existing.correct_document_id,
            "correct_page": existing.correct_page,
        }
        sent = {key: value for key, value in given.validated_data.items() if key in request.data}
        data.update(sent)
        if "correct_document" in sent and sent["correct_document"] is None and "correct_page" not in sent:
            data["correct_page"] = None  # no document: no page in it either
        return self._answer(self._save(request, message, data))

    @extend_schema(parameters=[MESSAGE_ID], responses={204: None})
    def delete(self, request: Request, message_id: int) -> Response:
        message = access_message(request_user(request), message_id)
        actions.do_delete_feedback(request_user(request), message)
        return Response(status=status.HTTP_204_NO_CONTENT)


def _flag(request: Request, name: str) -> bool | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise ValidationError({name: [_("Must be true or false.")]})


def _whole(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= 2**31 - 1:
        raise ValidationError({name: [_("Must be the id of one: a whole number from 1.")]})
    return value


@extend_schema(
    parameters=[
        OpenApiParameter("collection", ID, description="Only feedback on answers that searched it."),
        OpenApiParameter("rating", OpenApiTypes.STR, enum=Feedback.Rating.values, description="up or down."),
        OpenApiParameter("mine", OpenApiTypes.BOOL, description="true: only your own feedback."),
        OpenApiParameter("conversation", ID, description="Only your feedback in this conversation."),
    ]
)
class FeedbackListView(generics.ListAPIView[Feedback]):
    """The feedback the caller may read, newest first: their own, and the feedback on answers
    that searched a collection they manage."""

    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    serializer_class = FeedbackSerializer

    def get_queryset(self) -> QuerySet[Feedback]:
        if getattr(self, "swagger_fake_view", False):
            return Feedback.objects.none()
        request = self.request
        found = _feedbacks().filter(pk__in=Feedback.objects.visible_to(request.user).values("pk"))
        collection = _whole(request, "collection")
        if collection is not None:
            # Only a collection the caller sees: the others searched are not theirs to know of.
            visible = Collection.objects.visible_to(request.user).filter(pk=collection).values("pk")
            found = found.filter(collections__in=visible)
        rating = request.query_params.get("rating")
        if rating is not None:
            if rating not in Feedback.Rating.values:
                raise ValidationError({"rating": [_("Must be up or down.")]})
            found = found.filter(rating=rating)
        conversation = _whole(request, "conversation")
        if _flag(request, "mine") or conversation is not None:
            found = found.filter(user=request.user.pk)
        if conversation is not None:
            found = found.filter(message__conversation=conversation)
        return found.order_by("-updated_at", "-pk")


class FeedbackDetailView(generics.RetrieveAPIView[Feedback]):
    """One feedback item the caller may read (its author changes it through the answer's
    route, /api/messages/<id>/feedback/)."""

    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    serializer_class = FeedbackSerializer

    def get_queryset(self) -> QuerySet[Feedback]:
        return _feedbacks().filter(pk__in=Feedback.objects.visible_to(self.request.user).values("pk"))


urlpatterns = [
    path("messages/<int:message_id>/feedback/", MessageFeedbackView.as_view(), name="message-feedback"),
    path("feedback/", FeedbackListView.as_view(), name="feedback-list"),
    path("feedback/<int:pk>/", FeedbackDetailView.as_view(), name="feedback-detail"),
]
