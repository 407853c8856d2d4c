"""Serializers only shape and check data; writes go through knowledge.actions."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import F, OuterRef, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from common.runs import Run
from knowledge.actions import clean_name
from knowledge.models import (
    ApiToken,
    Collection,
    Document,
    IndexVersion,
    Invitation,
    Membership,
    Page,
    PageImage,
    Role,
    Team,
)
from knowledge.renders import can_render


class TeamSerializer(serializers.ModelSerializer[Team]):
    my_role = serializers.SerializerMethodField()

    class Meta:
        model = Team
        fields = ["id", "name", "description", "created_at", "my_role"]
        read_only_fields = ["id", "created_at", "my_role"]

    def get_my_role(self, team: Team) -> str | None:
        roles: dict[int, str] = self.context.get("my_roles", {})
        return roles.get(team.pk)

    def validate_name(self, value: str) -> str:
        # The actions check it again (with the uniqueness in any case); here the error is
        # given under the field's name.
        try:
            return clean_name(value)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.messages) from None


class MembershipSerializer(serializers.ModelSerializer[Membership]):
    email = serializers.EmailField(source="user.email", read_only=True)

    class Meta:
        model = Membership
        fields = ["id", "email", "role", "created_at"]
        read_only_fields = ["id", "email", "created_at"]


class AddMemberSerializer(serializers.Serializer[None]):
    email = serializers.EmailField()
    role = serializers.ChoiceField(choices=Role.choices, default=Role.VIEWER)


class InvitationSerializer(serializers.ModelSerializer[Invitation]):
    """An invitation as its team's admins and its invitee see it. Nothing in it says whether
    the address has an account."""

    team_name = serializers.CharField(source="team.name", read_only=True)
    invited_by = serializers.SerializerMethodField()
    status = serializers.CharField(source="state", read_only=True)

    class Meta:
        model = Invitation
        fields = [
            "id",
            "team",
            "team_name",
            "email",
            "role",
            "status",
            "invited_by",
            "created_at",
            "sent_at",
            "expires_at",
        ]
        read_only_fields = fields

    def get_invited_by(self, invitation: Invitation) -> str | None:
        return invitation.invited_by.email if invitation.invited_by else None


class RoleSerializer(serializers.Serializer[None]):
    role = serializers.ChoiceField(choices=Role.choices)


class StrictRelatedField(serializers.PrimaryKeyRelatedField):
    """A primary key or null; DRF's own field would also take "" for null, which the schema
    (integer or null) does not allow."""

    def run_validation(self, data: Any = empty) -> Any:
        if data == "":
            self.fail("incorrect_type", data_type="str")
        return super().run_validation(data)


class CollectionSerializer(serializers.ModelSerializer[Collection]):
    team = StrictRelatedField(source="owner_team", queryset=Team.objects.all(), required=False, allow_null=True)
    owner = serializers.CharField(source="owner_label", read_only=True)

    class Meta:
        model = Collection
        fields = ["id", "name", "description", "team", "owner", "created_at", "updated_at"]
        read_only_fields = ["id", "owner", "created_at", "updated_at"]
        # Uniqueness per owner is checked by knowledge.actions, with a readable message.
        validators: list[object] = []

    def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        # Only teams the caller belongs to can be named; others read as "does not exist".
        if request is not None:
            self.fields["team"].queryset = Team.objects.visible_to(request.user)  # type: ignore[attr-defined]


class CollectionUpdateSerializer(serializers.ModelSerializer[Collection]):
    class Meta:
        model = Collection
        fields = ["name", "description"]
        validators: list[object] = []


class RefusesUnknownFields(serializers.Serializer[Any]):
    """Input naming a field that the serializer does not take is a 400 that names it, never
    ignored: a misspelled limit (a token's `collections`) must not give more than was asked."""

    def validate(self, attrs: Any) -> Any:
        sent = self.initial_data if isinstance(getattr(self, "initial_data", None), dict) else {}
        taken = {name for name, field in self.fields.items() if not field.read_only}
        unknown = sorted(str(name) for name in sent if name not in taken)
        if unknown:
            message = _("Unknown field. This request takes: %(fields)s.") % {"fields": ", ".join(sorted(taken))}
            raise serializers.ValidationError({name: [message] for name in unknown})
        return super().validate(attrs)


class ApiTokenSerializer(RefusesUnknownFields, serializers.ModelSerializer[ApiToken]):
    collections = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        required=False,
        allow_null=True,
        max_length=100,
        source="collection_ids",
        help_text="Only these collections (ids of yours); left out or null: every collection you can see.",
    )

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "read_only", "collections", "created_at", "last_used_at", "revoked_at"]
        read_only_fields = ["id", "prefix", "created_at", "last_used_at", "revoked_at"]
        extra_kwargs = {
            "read_only": {"help_text": "It may read, search and ask, never change anything (403 on a write)."}
        }


class NewApiTokenSerializer(ApiTokenSerializer):
    key = serializers.CharField(read_only=True, help_text="Shown once: store it now.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "key"]


def newest_ingest_runs(runs: QuerySet[Any]) -> QuerySet[Any]:
    """Of `runs` (ingestion runs, reached through `Document.runs`: knowledge imports nothing
    of the ingestion layer above it), each document's newest ingestion (upload or re-run; not
    a split document's later parts), with `pages_done`: its own pages and its parts'. One
    query for a whole list (ingestion/api/documents.py prefetches it as `last_runs`)."""
    newest = (
        runs.model._default_manager.filter(document=OuterRef("document"), kind="ingest", part_of=None)
        .order_by("-created_at", "-pk")  # kind: IngestionRun.Kind.INGEST
        .values("pk")[:1]
    )
    return with_pages_done(runs.filter(pk=Subquery(newest)))


def with_pages_done(runs: QuerySet[Any]) -> QuerySet[Any]:
    """`runs` with `pages_done`: a run's own pages and, for a split document, its parts'."""
    parts = runs.model._default_manager.filter(part_of=OuterRef("pk")).order_by().values("part_of")
    done = parts.annotate(done=Sum("progress")).values("done")
    return runs.annotate(pages_done=F("progress") + Coalesce(Subquery(done), 0))


class DocumentRunSerializer(serializers.Serializer[Any]):
    """A document's last ingestion run: whether it is queued, running or ended, how far it
    got, why it failed, and when it ended."""

    id = serializers.IntegerField(read_only=True)
    status = serializers.ChoiceField(choices=Run.Status.choices, read_only=True)
    pages_done = serializers.IntegerField(read_only=True)
    pages_total = serializers.IntegerField(source="total", allow_null=True, read_only=True)  # null: not known yet
    error = serializers.CharField(read_only=True)
    created_at = serializers.DateTimeField(read_only=True)
    started_at = serializers.DateTimeField(allow_null=True, read_only=True)
    finished_at = serializers.DateTimeField(allow_null=True, read_only=True)


class DocumentSerializer(serializers.ModelSerializer[Document]):
    last_run = serializers.SerializerMethodField()

    class Meta:
        model = Document
        fields = [
            "id",
            "collection",
            "name",
            "rel_path",
            "mime",
            "size",
            "sha256",
            "status",
            "error",
            "page_count",
            "created_at",
            "updated_at",
            "last_run",
        ]
        read_only_fields = fields

    @extend_schema_field(DocumentRunSerializer(allow_null=True))
    def get_last_run(self, document: Document) -> dict[str, Any] | None:
        runs = getattr(document, "last_runs", None)  # prefetched for a list
        if runs is None:
            runs = list(newest_ingest_runs(document.runs.all()))
        return DocumentRunSerializer(runs[0]).data if runs else None


class PageImageSerializer(serializers.ModelSerializer[PageImage]):
    url = serializers.SerializerMethodField()

    class Meta:
        model = PageImage
        fields = ["sha256", "bbox", "t_start", "url"]
        read_only_fields = fields

    def get_url(self, image: PageImage) -> str:
        return f"/api/pages/{image.page_id}/images/{image.sha256}/"


class PageSerializer(serializers.ModelSerializer[Page]):
    render_url = serializers.SerializerMethodField()
    images = PageImageSerializer(many=True, read_only=True)

    class Meta:
        model = Page
        fields = [
            "id",
            "number",
            "kind",
            "heading_path",
            "width",
            "height",
            "needs_ocr",
            "text",
            "meta",
            "render_url",
            "images",
        ]
        read_only_fields = fields

    def get_render_url(self, page: Page) -> str | None:
        return f"/api/pages/{page.pk}/render/" if can_render(page) else None


class IndexVersionSerializer(serializers.ModelSerializer[IndexVersion]):
    class Meta:
        model = IndexVersion
        fields = ["id", "number", "status", "embedder_id", "dims", "config", "created_at", "built_at", "activated_at"]
        read_only_fields = fields
