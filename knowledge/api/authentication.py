from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext as _
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request

from knowledge.models import ApiToken
from knowledge.models.tokens import hash_key
from knowledge.principal import carry_token, limited_message

KEYWORDS = ("token", "bearer")


def user_for_key(key: str) -> tuple[Any, ApiToken] | None:
    """The active user and token for a raw key, or None. Shared by REST, websockets and MCP.
    The user carries the token, so that every query of the request keeps to its limits
    (knowledge/principal.py)."""
    token = ApiToken.objects.active().select_related("user").filter(key_hash=hash_key(key)).first()
    if token is None:
        return None
    carry_token(token.user, token)
    now = timezone.now()
    # Record use at most once a minute so busy integrations do not write on every call.
    if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user, token


def key_from_header(value: str) -> str | None:
    parts = value.split()
    if len(parts) == 2 and parts[0].lower() in KEYWORDS:
        return parts[1]
    return None


def check_read_only(token: ApiToken, request: Request) -> None:
    """A read-only token may read, search and ask (views that only read with POST say so with
    `reads_only = True`), never change anything: PermissionDenied otherwise. Here rather than
    in a permission class, so that no view's own permissions can leave it out."""
    if not token.read_only or request.method in SAFE_METHODS:
        return
    view = (request.parser_context or {}).get("view")
    if not getattr(view, "reads_only", False):
        raise exceptions.PermissionDenied(_("This API token is read-only: it cannot change anything."))


def check_limited(token: ApiToken, request: Request) -> None:
    """A token limited to some collections reaches only the views that keep it to them
    (`limited_tokens = True`: collections, their documents, search, answers, and the per-user
    lists narrowed to those collections); every other view (tokens, teams, invitations,
    sources, memory) refuses it with a 403 before it runs, whatever the method. A new view is
    refused until it says so. Beside check_read_only, for the same reason."""
    if not token.limited:
        return
    view = (request.parser_context or {}).get("view")
    if not getattr(view, "limited_tokens", False):
        raise exceptions.PermissionDenied(limited_message())


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Token <key>` (or `Bearer <key>`)."""

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        key = key_from_header(header)
        if key is None:
            if header.split()[0].lower() in KEYWORDS:
                raise exceptions.AuthenticationFailed(_("Malformed Authorization header: use 'Token <key>'."))
            return None
        found = user_for_key(key)
        if found is None:
            raise exceptions.AuthenticationFailed(_("Invalid or revoked API token."))
        check_read_only(found[1], request)
        check_limited(found[1], request)
        return found

    def authenticate_header(self, request: Request) -> str:
        return "Token"


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "knowledge.api.authentication.ApiTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <key>`; create keys under API tokens.",
        }
