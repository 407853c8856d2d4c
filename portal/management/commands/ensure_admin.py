"""Create the first admin account when the portal has none, and say how to log in."""

from __future__ import annotations

import os
import secrets
from typing import Any

from allauth.account.models import EmailAddress
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction


class Command(BaseCommand):
    help = "Create the first admin (PORTAL_ADMIN_EMAIL / PORTAL_ADMIN_PASSWORD) if no superuser exists."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default="http://127.0.0.1:8000/", help="The portal's address, for the message.")

    def handle(self, *args: Any, url: str, **options: Any) -> None:
        User = get_user_model()  # noqa: N806
        login = f"{url.rstrip('/')}/accounts/login/"
        if User.objects.filter(is_superuser=True).exists():
            self.stdout.write(f"Log in at {login} with your account.")
            return
        email = settings.ADMIN_EMAIL
        if User.objects.filter(email__iexact=email).exists():
            # Never promote an existing account: anyone could have signed up with that address.
            raise CommandError(
                f"No admin exists, and {email} (PORTAL_ADMIN_EMAIL) already belongs to an ordinary account. "
                "Set PORTAL_ADMIN_EMAIL to another address, or run `manage.py createsuperuser`."
            )
        password = settings.ADMIN_PASSWORD or secrets.token_urlsafe(12)
        with transaction.atomic():
            user = User.objects.create_superuser(username="admin", email=email, password=password)
            EmailAddress.objects.create(user=user, email=email, verified=True, primary=True)
        where = "PORTAL_ADMIN_PASSWORD"
        if not settings.ADMIN_PASSWORD:
            # Kept where only this machine's owner can read it, in case the console scrolls away.
            path = settings.VAR_DIR / "initial_admin_password"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(password + "\n")
            where = str(path)
            self.stdout.write(self.style.SUCCESS(f"Created the first admin: {email} / password {password}"))
        self.stdout.write(f"Log in at {login} as {email} (password: {where}). Change it after the first login.")
