from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from tests.conftest import make_user


def test_it_creates_the_first_admin_once(db, settings, tmp_path, capsys):
    settings.VAR_DIR = tmp_path
    settings.ADMIN_EMAIL, settings.ADMIN_PASSWORD = "root@example.com", ""
    call_command("ensure_admin", url="http://127.0.0.1:9000/")
    out = capsys.readouterr().out
    admin = get_user_model().objects.get(email="root@example.com")
    password = (tmp_path / "initial_admin_password").read_text().strip()
    assert admin.is_superuser
    assert admin.check_password(password)
    assert "http://127.0.0.1:9000/accounts/login/" in out
    assert password in out
    call_command("ensure_admin")
    assert get_user_model().objects.filter(is_superuser=True).count() == 1


def test_it_never_promotes_an_existing_account(db, settings):
    make_user("mallory")
    settings.ADMIN_EMAIL = "mallory@example.com"
    with pytest.raises(CommandError, match="PORTAL_ADMIN_EMAIL"):
        call_command("ensure_admin")
    assert not get_user_model().objects.filter(is_superuser=True).exists()
