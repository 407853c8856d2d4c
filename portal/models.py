from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import models
from django.db.models.functions import Lower
from django.utils.translation import gettext_lazy as _


class User(AbstractUser):
    """A portal user. People log in by email; `uid` is the stable id other systems and
    the per-user memory store key on (never reused, unlike a display name)."""

    uid = models.UUIDField(_("UID"), default=uuid.uuid4, unique=True, editable=False)
    email = models.EmailField(_("email address"), blank=True)
    # The API token a request came with (knowledge's ApiToken, set on authentication): its
    # read-only flag and collections bound what the request may do. None for a session.
    api_token: Any = None

    class Meta(AbstractUser.Meta):  # type: ignore[name-defined]
        swappable = "AUTH_USER_MODEL"
        constraints = [
            models.UniqueConstraint(Lower("email"), condition=~models.Q(email=""), name="user_unique_email_ci"),
        ]

    def __str__(self) -> str:
        return self.email or self.username
