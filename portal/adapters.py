"""allauth's adapters, and what the portal adds around signing in: lockouts are logged and
audited, and staff logins audited. A locked-out user can still reset the password: allauth's
reset lifts the account's lockout (its addresses', `User.email` included, which allauth copies
into an EmailAddress row while making the reset link).

Every password login goes through allauth (the admin's own form is wrapped in portal/urls.py),
so allauth's `login_failed` rate is the one lockout policy: by default 5 failures per account
in 5 minutes and 10 per client address in a minute, counted in the shared Redis cache."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.utils import filter_users_by_email
from allauth.core.internal.ratelimit import get_rates
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.http import HttpRequest

from audit.log import client_ip, record
from audit.models import Action

log = logging.getLogger("portal.security")

LOCKED_CODE = "too_many_login_attempts"  # allauth's code for a login refused by the limit


class AccountAdapter(DefaultAccountAdapter):
    def is_open_for_signup(self, request: HttpRequest) -> bool:
        return bool(settings.SIGNUP_ENABLED)

    def pre_authenticate(self, request: HttpRequest, **credentials: Any) -> None:
        """allauth refuses here, before the password is checked, once the limit is reached."""
        try:
            super().pre_authenticate(request, **credentials)
        except ValidationError as error:
            if error.code == LOCKED_CODE:
                login_locked(request, str(credentials.get("email", credentials.get("username", ""))))
            raise


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    def is_open_for_signup(self, request: HttpRequest, sociallogin: Any) -> bool:
        # Single sign-on users get an account on first login even when the signup form is off:
        # the identity provider already decided who may come in.
        return True


def lockout_window() -> int:
    """Seconds the longest of allauth's `login_failed` rates looks back (300 by default)."""
    rates = get_rates(app="allauth.account", action="login_failed")
    return int(max((rate.duration for rate in rates), default=300))


def login_locked(request: HttpRequest, login: str) -> None:
    """A login refused by the limit: a warning every time, and one audit entry per account
    and address per lockout window, so that an attacker who goes on does not flood the log.
    Logins that name no account share one entry per address (a spray of made-up addresses)."""
    ip = client_ip(request)
    users = filter_users_by_email(login) if login else []
    user = users[0] if users else None
    log.warning("Login refused, too many failed attempts: %s from %s", login[:254], ip or "unknown address")
    who = f"user:{user.pk}" if user is not None else "unknown"
    marker = "login-locked:" + hashlib.sha256(f"{who}|{ip or ''}".encode()).hexdigest()
    if not cache.add(marker, 1, timeout=lockout_window()):
        return
    record(
        Action.LOGIN_LOCKED,
        object_type="user",
        object_id=user.pk if user is not None else "",
        label=login[:254],
        owner_id=user.pk if user is not None else None,
        ip=ip,
    )


def audit_staff_login(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    """`user_logged_in`: staff sign-ins leave an entry (they can reach the admin)."""
    if not getattr(user, "is_staff", False):
        return
    record(
        Action.ADMIN_LOGIN,
        user,
        object_type="user",
        owner_id=user.pk,
        actor=user,
        ip=client_ip(request) if request is not None else None,
    )
