from __future__ import annotations

import io

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


def test_prepare_migrates_makes_the_first_admin_and_the_model_files_in_one_process(db, settings, tmp_path):
    """What `manage.py up` runs before its processes start (one process instead of three)."""
    settings.VAR_DIR = tmp_path
    settings.ADMIN_EMAIL, settings.ADMIN_PASSWORD = "root@example.com", "a first password"
    out = io.StringIO()
    call_command("prepare", url="http://127.0.0.1:9000/", stdout=out)
    printed = out.getvalue()
    assert "No migrations to apply." in printed
    assert "Log in at http://127.0.0.1:9000/accounts/login/ as root@example.com" in printed
    assert get_user_model().objects.get(email="root@example.com").is_superuser
    assert f"chat model ready: {settings.MODELS_DIR}" in printed
