"""Thin viewsets: querysets restricted to the caller, writes through knowledge.actions."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import BadRequest, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.http.multipartparser import MultiPartParserError
from django.utils.log import log_response
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from knowledge import actions
from knowledge.access import (
    access_collection,
    access_membership,
    access_my_invitation,
    access_team,
    access_team_invitation,
    access_token,
)
from knowledge.api import serializers as s
from knowledge.api.schema import NOT_FOUND
from knowledge.models import ApiToken, Collection, Invitation, Membership, Role, Team
from knowledge.principal import refuse_limited
from portal.models import User

TEAM_PK = OpenApiParameter("team_pk", OpenApiTypes.INT, OpenApiParameter.PATH, description="The team's id.")


def request_user(request: Request) -> User:
    """The caller; every view here requires authentication (REST_FRAMEWORK's default)."""
    user = request.user
    assert isinstance(user, User)
    return user


# Django answers these with a 400 itself (portal.views.bad_request: JSON under /api/) and logs
# them as security events: a body over DATA_UPLOAD_MAX_MEMORY_SIZE is one.
DJANGO_400 = (SuspiciousOperation, BadRequest, MultiPartParserError)


def server_error_detail() -> str:
    """The `detail` of every 500 under /api/: nothing about its cause, which is in the log."""
    return _("The server failed to answer this request. The error has been logged; try again later.")


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Readable 400s for the ValidationErrors that actions raise; an exception no view expected
    is a JSON 500 (logged with its traceback) rather than Django's HTML page."""
    if isinstance(exc, DjangoValidationError):
        exc = ValidationError({"detail": exc.messages})
    response = drf_exception_handler(exc, context)
    if response is not None or isinstance(exc, DJANGO_400):
        return response
    set_rollback()
    response = Response({"detail": server_error_detail()}, status=status.HTTP_500_INTERNAL_SERVER_ERROR)
    request = context["request"]
    # Django's own "Internal Server Error" entry, traceback included; it marks the response
    # logged, so that Django does not log it a second time without the traceback.
    log_response("Internal Server Error: %s", request.path, response=response, request=request, exception=exc)
    return response


class TeamViewSet(viewsets.ModelViewSet[Team]):
    """The caller's teams: any member reads, team admins rename and delete."""

    serializer_class = s.TeamSerializer

    def get_queryset(self) -> QuerySet[Team]:
        return Team.objects.visible_to(self.request.user).order_by("name")

    def get_serializer_context(self) -> dict[str, Any]:
        roles = dict(Membership.objects.filter(user=self.request.user.pk).values_list("team_id", "role"))
        return {**super().get_serializer_context(), "my_roles": roles}

    def get_object(self) -> Team:
        write = self.request.method not in ("GET", "HEAD", "OPTIONS")
        return access_team(self.request.user, self.kwargs["pk"], manage=write)

    def perform_create(self, serializer: s.TeamSerializer) -> None:  # type: ignore[override]
        data = serializer.validated_data
        team = actions.do_create_team(request_user(self.request), data["name"], data.get("description", ""))
        serializer.context["my_roles"][team.pk] = Role.ADMIN.value
        serializer.instance = team

    def perform_update(self, serializer: s.TeamSerializer) -> None:  # type: ignore[override]
        assert serializer.instance is not None
        data = serializer.validated_data
        actions.do_update_team(serializer.instance, name=data.get("name"), description=data.get("description"))

    def perform_destroy(self, instance: Team) -> None:
        actions.do_delete_team(instance)


@extend_schema_view(
    list=extend_schema(parameters=[TEAM_PK]),
    create=extend_schema(parameters=[TEAM_PK]),
    partial_update=extend_schema(parameters=[TEAM_PK]),
    destroy=extend_schema(parameters=[TEAM_PK]),
)
class MembershipViewSet(
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet[Membership],
):
    """Members of one team: any member can list, team admins add, change and remove."""

    serializer_class = s.MembershipSerializer

    def team(self, *, manage: bool = False) -> Team:
        return access_team(self.request.user, self.kwargs["team_pk"], manage=manage)

    def get_queryset(self) -> QuerySet[Membership]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request user
            return Membership.objects.none()
        return Membership.objects.filter(team=self.team()).select_related("user").order_by("user__email")

    def get_object(self) -> Membership:
        return access_membership(self.request.user, self.kwargs["team_pk"], self.kwargs["pk"])

    @extend_schema(
        request=s.AddMemberSerializer,
        responses={201: s.InvitationSerializer},
        description="Invites the address: it becomes a member only by accepting. The answer is the "
        "same whether or not the address has an account.",
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return _invite(request, self.team(manage=True))

    @extend_schema(request=s.RoleSerializer, responses={200: s.MembershipSerializer})
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        membership = self.get_object()  # access before validation: strangers get 404, not 400
        form = s.RoleSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        membership = actions.do_change_role(membership, Role(form.validated_data["role"]))
        return Response(s.MembershipSerializer(membership).data)

    def perform_destroy(self, instance: Membership) -> None:
        actions.do_remove_member(instance)


def _invite(request: Request, team: Team) -> Response:
    form = s.AddMemberSerializer(data=request.data)
    form.is_valid(raise_exception=True)
    data = form.validated_data
    invitation = actions.do_invite(team, data["email"], Role(data["role"]), request_user(request))
    return Response(s.InvitationSerializer(invitation).data, status=status.HTTP_201_CREATED)


@extend_schema_view(
    list=extend_schema(parameters=[TEAM_PK]),
    create=extend_schema(parameters=[TEAM_PK], request=s.AddMemberSerializer, responses={201: s.InvitationSerializer}),
    destroy=extend_schema(parameters=[TEAM_PK], description="Revokes the invitation."),
    resend=extend_schema(parameters=[TEAM_PK], request=None, responses={200: s.InvitationSerializer}),
)
class TeamInvitationViewSet(
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet[Invitation],
):
    """A team's invitations: its admins invite, list, send again and revoke."""

    serializer_class = s.InvitationSerializer

    def get_queryset(self) -> QuerySet[Invitation]:
        if getattr(self, "swagger_fake_view", False):
            return Invitation.objects.none()
        team = access_team(self.request.user, self.kwargs["team_pk"], manage=True)
        return Invitation.objects.filter(team=team).select_related("team", "invited_by")

    def get_object(self) -> Invitation:
        return access_team_invitation(self.request.user, self.kwargs["team_pk"], self.kwargs["pk"])

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return _invite(request, access_team(request.user, self.kwargs["team_pk"], manage=True))

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        actions.do_revoke_invitation(self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @action(detail=True, methods=["post"])
    def resend(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        invitation = actions.do_resend_invitation(self.get_object())
        return Response(s.InvitationSerializer(invitation).data)


@extend_schema_view(
    accept=extend_schema(request=None, responses={200: s.MembershipSerializer}),
    decline=extend_schema(request=None, responses={200: s.InvitationSerializer}),
)
class MyInvitationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Invitation]):
    """Invitations to the caller's email address: pending ones are listed; accepting one makes
    the caller a member, with the invited role."""

    serializer_class = s.InvitationSerializer

    def get_queryset(self) -> QuerySet[Invitation]:
        if self.action == "list":
            return Invitation.objects.for_user(self.request.user).pending().select_related("team", "invited_by")
        return Invitation.objects.for_user(self.request.user).select_related("team", "invited_by")

    def get_object(self) -> Invitation:
        return access_my_invitation(self.request.user, self.kwargs["pk"])

    @action(detail=True, methods=["post"])
    def accept(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        membership = actions.do_accept_invitation(self.get_object(), request_user(request))
        return Response(s.MembershipSerializer(membership).data)

    @action(detail=True, methods=["post"])
    def decline(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        invitation = actions.do_decline_invitation(self.get_object())
        return Response(s.InvitationSerializer(invitation).data)


class CollectionViewSet(viewsets.ModelViewSet[Collection]):
    """Collections the caller can see; editors rename, owners and team admins delete."""

    limited_tokens = True  # keeps a limited API token to its collections (knowledge/principal.py)

    def get_serializer_class(self) -> type[Any]:
        if self.action in ("update", "partial_update"):
            return s.CollectionUpdateSerializer
        return s.CollectionSerializer

    def get_queryset(self) -> QuerySet[Collection]:
        return (
            Collection.objects.visible_to(self.request.user)
            .select_related("owner_user", "owner_team")
            .order_by("name", "pk")
        )

    def get_object(self) -> Collection:
        method = self.request.method
        return access_collection(
            self.request.user, self.kwargs["pk"], write=method in ("PUT", "PATCH"), manage=method == "DELETE"
        )

    def perform_create(self, serializer: s.CollectionSerializer) -> None:  # type: ignore[override]
        refuse_limited(self.request.user)  # it could not see the new collection: not its to make
        data = serializer.validated_data
        serializer.instance = actions.do_create_collection(
            request_user(self.request),
            data["name"],
            team=data.get("owner_team"),
            description=data.get("description", ""),
        )

    def perform_update(self, serializer: s.CollectionUpdateSerializer) -> None:  # type: ignore[override]
        assert serializer.instance is not None
        data = serializer.validated_data
        actions.do_rename_collection(
            serializer.instance, data.get("name", serializer.instance.name), data.get("description")
        )

    def perform_destroy(self, instance: Collection) -> None:
        actions.do_delete_collection(instance)


class ApiTokenViewSet(
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet[ApiToken],
):
    """The caller's own API tokens. DELETE revokes; the key is returned only on create."""

    serializer_class = s.ApiTokenSerializer

    def get_queryset(self) -> QuerySet[ApiToken]:
        return ApiToken.objects.filter(user=self.request.user.pk)

    def get_object(self) -> ApiToken:
        return access_token(self.request.user, self.kwargs["pk"])

    @extend_schema(request=s.ApiTokenSerializer, responses={201: s.NewApiTokenSerializer, 404: NOT_FOUND})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        form = s.ApiTokenSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        user = request_user(request)
        chosen = None
        if data.get("collection_ids") is not None:
            chosen = [access_collection(user, pk) for pk in data["collection_ids"]]  # 404 for what is not yours
        try:
            token, key = actions.do_create_token(
                user, data["name"], read_only=data.get("read_only", False), collections=chosen
            )
        except DjangoValidationError as exc:
            raise ValidationError(exc.message_dict if hasattr(exc, "error_dict") else {"name": exc.messages}) from None
        data = {**s.ApiTokenSerializer(token).data, "key": key}
        return Response(data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: ApiToken) -> None:
        actions.do_revoke_token(instance)
