"""What a request may see: its user and, when it came with an API token, that token's limits.

A request or a socket has one principal: the user, carrying the token it authenticated with
(`user.api_token`, None for a session). Every path that takes an API key marks the user here,
with `carry_token`: REST (knowledge.api.authentication), websockets (portal/ws_auth.py, and
each later check of the user, knowledge.revocation.still_signed_in), MCP and `/v1` (the same
key lookup). Every query then asks here what the token allows, inside its SQL:

- collections: `Collection.objects.visible_to` (and `editable_by`, `manageable_by`) keep to
  a limited token's collections, so that every object in a collection follows;
- the per-user lists, `about_token_collections`: a limited token reads a conversation, a
  feedback item or an audit entry only when everything it is about is one of its collections
  (what is about nothing, or about another collection, does not exist for it);
- the account: a limited token manages nothing beyond its collections (not tokens, teams,
  invitations, sources, memories, nor new collections): the API's views that keep to
  collections say so with `limited_tokens = True` (knowledge.api.authentication refuses the
  others, before they run), and code outside those views calls `refuse_limited`. The memory
  is the account's too: answers given to a limited token neither read nor write it.

A token never grants more than its user has: these only narrow what the user may see.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from django.core.exceptions import PermissionDenied
from django.db.models import Exists, OuterRef, QuerySet
from django.utils.translation import gettext as _

if TYPE_CHECKING:
    from knowledge.models import ApiToken
    from portal.typing import AnyUser

Rows = TypeVar("Rows", bound=QuerySet[Any])


def carry_token(user: Any, token: ApiToken) -> Any:
    """`user`, marked as acting with `token`: what every later query keeps to."""
    user.api_token = token
    return user


def token_of(user: AnyUser) -> ApiToken | None:
    return getattr(user, "api_token", None)


def limited_collections(user: AnyUser) -> QuerySet[Any] | None:
    """The collections `user`'s token is limited to, as a subquery of their ids (a limited
    token whose collections were all deleted has none); None when nothing limits the request."""
    token = token_of(user)
    if token is None or not token.limited:
        return None
    return token.collections.values("pk")


def is_limited(user: AnyUser) -> bool:
    token = token_of(user)
    return token is not None and token.limited


def limited_message() -> str:
    return _(
        "This API token is limited to some collections: it cannot manage the account "
        "(tokens, teams, invitations, sources, memory, new collections)."
    )


def refuse_limited(user: AnyUser) -> None:
    """PermissionDenied (403) when `user` acts with a token limited to some collections."""
    if is_limited(user):
        raise PermissionDenied(limited_message())


def about_token_collections(
    rows: Rows, user: AnyUser, collections: str, *, also: Callable[[QuerySet[Any]], tuple[Any, Any]] | None = None
) -> Rows:
    """`rows` (conversations, feedback…) narrowed, for a limited token, to those about its
    collections only: a row's many-to-many `collections` names at least one collection and
    none outside the token's. `also(allowed)`: two more conditions on a row, (about one of
    `allowed`, about another collection), for what a row is about beyond that field (the
    collections a conversation's earlier answers searched). Unchanged when nothing limits
    the request."""
    allowed = limited_collections(user)
    if allowed is None:
        return rows
    through = rows.model._meta.get_field(collections).remote_field.through
    owner = next(
        field.name for field in through._meta.get_fields() if field.many_to_one and field.related_model is rows.model
    )
    named = through.objects.filter(**{owner: OuterRef("pk")})
    inside: Any = Exists(named.filter(collection_id__in=allowed))
    outside: Any = Exists(named.exclude(collection_id__in=allowed))
    if also is not None:
        more_inside, more_outside = also(allowed)
        inside, outside = inside | more_inside, outside | more_outside
    return rows.filter(inside).exclude(outside)
