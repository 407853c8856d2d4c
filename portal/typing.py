from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest

from portal.models import User

# Who a request may be: a portal user or nobody.
AnyUser = User | AnonymousUser


class AuthedRequest(HttpRequest):
    """The request of a view behind login_required: its user is a real portal user."""

    user: User
