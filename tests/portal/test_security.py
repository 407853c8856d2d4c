"""Production security settings, request and statement timeouts, and secrets kept out of
logs and error messages."""

from __future__ import annotations

import copy
import logging
import os
import subprocess
import sys

import pytest
from django.db import OperationalError, connections
from django.db.utils import DatabaseError

from portal import redact
from portal.db import for_the_web
from portal.supervisor import web_command
from providers.base import ChatMessage, ProviderError
from providers.config import RoleConfig
from providers.openai_compat import OpenAIChatModel
from tests.providers.wire import Reply, serve

PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": "x" * 60 + "production-only-key",
    "ALLOWED_HOSTS": "portal.example.com",
    "PORTAL_BEHIND_PROXY": "true",
}


def _deploy_check(**extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **PRODUCTION, **extra}
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_portal_https_passes_djangos_deploy_check():
    result = _deploy_check(PORTAL_HTTPS="true")
    assert result.returncode == 0, result.stderr + result.stdout


def test_without_https_the_deploy_check_names_what_is_missing():
    result = _deploy_check()
    assert result.returncode != 0
    for check in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert check in result.stderr + result.stdout


def test_pages_carry_the_security_headers(client, alice):
    client.force_login(alice)
    response = client.get("/")
    assert response.status_code == 200
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"
    login = client.get("/accounts/login/")
    cookie = client.cookies.get("csrftoken") or login.cookies.get("csrftoken")
    assert cookie is not None
    assert cookie["samesite"] == "Lax"


def test_https_redirects_and_sends_hsts_but_not_for_healthz(client, settings, db):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31_536_000
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    response = client.get("/accounts/login/")
    assert response.status_code == 301
    assert response["Location"] == "https://testserver/accounts/login/"
    secure = client.get("/accounts/login/", secure=True)
    assert secure["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
    assert client.get("/healthz").status_code in (200, 503)


def test_a_request_timeout_shorter_than_an_answer_is_refused():
    env = {**os.environ, "PORTAL_REQUEST_TIMEOUT": "60", "PORTAL_ANSWER_TIMEOUT": "300"}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert "PORTAL_REQUEST_TIMEOUT (60 s) must be longer than PORTAL_ANSWER_TIMEOUT (300 s)" in result.stderr


def test_the_web_command_passes_the_request_timeout_to_daphne():
    assert web_command("127.0.0.1", 8000, 600)[-3:] == ["-t", "600", "portal.asgi:application"]
    assert "-t" not in web_command("127.0.0.1", 8000)


@pytest.mark.django_db(transaction=True)
def test_web_statements_are_cancelled_after_the_timeout():
    """The web process's settings (portal.asgi applies them to its own), on a copy here."""
    own = connections["default"]
    databases = copy.deepcopy(own.settings_dict)
    for_the_web({"default": databases}, statement_timeout=1)
    assert databases["CONN_MAX_AGE"] == 0
    web = type(own)(databases, alias="default")  # a second connection, with the web's settings
    try:
        with web.cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            assert cursor.fetchone()[0] == "1s"
            with pytest.raises((OperationalError, DatabaseError), match="statement timeout"):
                cursor.execute("SELECT pg_sleep(3)")
    finally:
        web.close()
    assert own.settings_dict["CONN_MAX_AGE"] != 0  # this process's own settings untouched


@pytest.fixture
def secrets(monkeypatch):
    monkeypatch.setenv("API_KEY_CHAT", "sk-live-0123456789abcdef")
    monkeypatch.setenv("PORTAL_EXAMPLE_URL", "redis://default:hunter2-redis-pass@cache:6379/0")
    redact.secret_values.cache_clear()
    yield
    redact.secret_values.cache_clear()


def test_scrub_removes_keys_and_url_passwords(secrets):
    text = "key sk-live-0123456789abcdef at postgres://portal:s3cret-pass@db/portal and hunter2-redis-pass"
    assert redact.scrub(text) == "key *** at postgres://portal:***@db/portal and ***"


def test_a_provider_echoing_the_key_does_not_put_it_in_errors_or_logs(secrets, caplog):
    caplog.set_level(logging.DEBUG)
    with serve() as wire:
        wire.on(
            "/v1/chat/completions",
            Reply(500, {"error": {"message": "upstream refused key sk-live-0123456789abcdef"}}),
        )
        config = RoleConfig("chat", "openai", "m", f"{wire.url}/v1", "sk-live-0123456789abcdef", timeout=2.0)
        with pytest.raises(ProviderError) as raised:
            OpenAIChatModel(config).complete([ChatMessage("user", "hello")])
    assert "answered 500" in str(raised.value)
    unreachable = RoleConfig("chat", "openai", "m", "http://user:url-password-123@127.0.0.1:9/v1", "k", timeout=1.0)
    with pytest.raises(ProviderError, match="cannot reach") as refused:
        OpenAIChatModel(unreachable).complete([ChatMessage("user", "hello")])
    assert "url-password-123" not in str(refused.value)
    logging.getLogger("portal.test").error("failed: %s", raised.value, exc_info=raised.value)
    records: list[str] = []
    handler = logging.StreamHandler(stream=_Lines(records))
    handler.addFilter(redact.RedactSecrets())
    for record in caplog.records:
        handler.handle(record)
    printed = "".join(records)
    assert "answered 500" in printed
    for secret in ("sk-live-0123456789abcdef", "url-password-123"):
        assert secret not in str(raised.value)
        assert secret not in printed


class _Lines:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def write(self, text: str) -> None:
        self.lines.append(text)

    def flush(self) -> None:
        pass


def test_the_portals_log_handlers_scrub_secrets():
    from django.conf import settings

    assert settings.LOGGING["handlers"]["console"]["filters"] == ["secrets"]  # type: ignore[index]
    root = logging.getLogger()
    assert any(isinstance(f, redact.RedactSecrets) for h in root.handlers for f in h.filters)
