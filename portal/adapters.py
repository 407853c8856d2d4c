"""allauth's adapters, and what the portal adds around signing in: lockouts are logged and
audited, and staff logins audited. A locked-out user can still reset the password: allauth's
reset lifts the account's lockout (its addresses', `User.email` included, which allauth copies
into an EmailAddress row while making the reset link).

Every password login goes through allauth (the admin's own form is wrapped in portal/urls.py),
so allauth's `login_failed` rate is the one lockout policy: by default 5 failures per account
in 5 minutes and 10 per client address in a minute, counted in the shared Redis cache.

Sign-up never says whether an address has an account. Whatever PORTAL_EMAIL_VERIFICATION says,
an address typed at sign-up is confirmed by mail before its account can log in: a new address
gets the confirmation link, a known one a mail telling its owner how to get in, and the page
is the same ("check your mail"). allauth hides a taken address only when verification is
mandatory for everyone, which would also stop accounts an operator made from logging in
without a mail, offline; so the portal makes it mandatory for sign-ups alone (SignupForm,
EmailVerificationStage)."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from allauth.account import stages
from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.app_settings import EmailVerificationMethod
from allauth.account.forms import SignupForm as AllauthSignupForm
from allauth.account.models import EmailAddress, Login
from allauth.account.utils import filter_users_by_email
from allauth.core.internal.ratelimit import get_rates
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.models import SocialAccount
from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponseBase

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

    def get_login_stages(self) -> list[str]:
        """allauth's stages, with the portal's EmailVerificationStage in place of allauth's."""
        theirs, ours = "allauth.account.stages.EmailVerificationStage", f"{__name__}.EmailVerificationStage"
        return [ours if path == theirs else path for path in super().get_login_stages()]


class SignupForm(AllauthSignupForm):
    """allauth's sign-up form, which never reports an address as taken: the account that has
    it is told by mail instead (allauth's `account_already_exists` mail), and the person who
    typed it sees the same page as for a new address."""

    def validate_unique_email(self, value: str) -> str:
        # allauth raises "A user is already registered with this email address." here unless
        # verification is mandatory for everyone; sign-ups always are (EmailVerificationStage).
        self.account_already_exists = bool(filter_users_by_email(value))
        return value

    def try_save(self, request: HttpRequest) -> tuple[Any, HttpResponseBase | None]:
        if self.account_already_exists:
            # A new account's password is hashed (about 0.3 s): so is this one, and thrown
            # away, or the answer's time would tell the two apart.
            make_password(self.cleaned_data.get("password1"))
        user, response = super().try_save(request)
        return user, response


class EmailVerificationStage(stages.EmailVerificationStage):
    """allauth's stage, with verification mandatory for a sign-up through the form and for an
    account that signed up and has neither confirmed its address nor ever logged in. Other
    accounts follow PORTAL_EMAIL_VERIFICATION: those an operator made (`manage.py up`, the
    admin, createsuperuser) and those that signed up before this rule log in as they did."""

    def handle(self) -> tuple[HttpResponseBase | None, bool]:
        if self.login.email_verification != EmailVerificationMethod.MANDATORY and needs_proof(self.login):
            self.login.email_verification = EmailVerificationMethod.MANDATORY
        response, go_on = super().handle()
        return response, go_on


def needs_proof(login: Login) -> bool:
    if "sociallogin" in (login.signal_kwargs or {}):
        return False  # single sign-on: the identity provider vouches for its users
    if login.signup:
        return True
    user = login.user
    if user is None or user.last_login is not None:
        return False
    addresses = EmailAddress.objects.filter(user=user)
    return (
        addresses.exists()
        and not addresses.filter(verified=True).exists()
        and not SocialAccount.objects.filter(user=user).exists()
    )


def confirm_address_on_reset(sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
    """allauth's `password_reset`: the link came by mail, so the mailbox is proven. An account
    with one address (the reset went there) has it confirmed: an operator-made account whose
    owner set a password this way, before ever logging in, is not asked to confirm it again,
    and whoever signed up with someone else's address loses the account to its owner."""
    addresses = list(EmailAddress.objects.filter(user=user))
    if len(addresses) != 1 or addresses[0].verified or addresses[0].email.lower() != (user.email or "").lower():
        return
    addresses[0].verified = True
    addresses[0].save(update_fields=["verified"])


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
