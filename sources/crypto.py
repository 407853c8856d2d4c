"""Credentials encrypted at rest with Fernet (AES-128-CBC and HMAC-SHA256, from the
`cryptography` package): the key comes from PORTAL_SOURCE_KEYS, or is derived from
SECRET_KEY when that is empty. Several keys may be given: the first encrypts, every one
decrypts (MultiFernet), so a key is rotated by putting the new one first and running
`manage.py sources --rotate-keys`."""

from __future__ import annotations

import base64
import hashlib
import json

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.utils.translation import gettext as _

from sources.remotes.base import Credentials


class CredentialsError(Exception):
    """Stored credentials that no configured key opens (the key changed)."""


def _fernet(key: str) -> Fernet:
    # Any string becomes a Fernet key: 32 bytes of SHA-256, base64. A key generated with
    # Fernet.generate_key() is used as it is.
    try:
        return Fernet(key.encode())
    except ValueError:
        digest = hashlib.sha256(b"portal-sources:" + key.encode()).digest()
        return Fernet(base64.urlsafe_b64encode(digest))


def _keys() -> MultiFernet:
    keys = settings.SOURCE_KEYS or [settings.SECRET_KEY]
    return MultiFernet([_fernet(key) for key in keys])


def encrypt(credentials: Credentials) -> str:
    """The credentials as a Fernet token ("" when there are none)."""
    if not (credentials.username or credentials.password or credentials.extra):
        return ""
    payload = {"username": credentials.username, "password": credentials.password, "extra": credentials.extra}
    return _keys().encrypt(json.dumps(payload).encode()).decode()


def decrypt(token: str) -> Credentials:
    if not token:
        return Credentials()
    try:
        payload = json.loads(_keys().decrypt(token.encode()))
    except InvalidToken:
        raise CredentialsError(
            _(
                "The stored credentials cannot be read with the configured key (PORTAL_SOURCE_KEYS or SECRET_KEY "
                "changed): enter them again."
            )
        ) from None
    return Credentials(payload.get("username", ""), payload.get("password", ""), dict(payload.get("extra", {})))


def rotate(token: str) -> str:
    """The token encrypted again with the first key."""
    if not token:
        return ""
    try:
        return _keys().rotate(token.encode()).decode()
    except InvalidToken:
        decrypt(token)  # raises the readable error
        raise
