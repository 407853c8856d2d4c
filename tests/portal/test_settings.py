from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal import env
from tests.stack import ROOT, child_env


def test_it_reads_booleans_and_names_the_variable(monkeypatch):
    monkeypatch.setenv("X_FLAG", "Yes")
    assert env.env_bool("X_FLAG", False) is True
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG"):
        env.env_bool("X_FLAG", False)


def test_it_parses_database_urls():
    config = env.parse_database_url("postgres://u:p%40ss@db.example:6543/portal?sslmode=require")
    assert (config["NAME"], config["USER"], config["PASSWORD"]) == ("portal", "u", "p@ss")
    assert (config["HOST"], config["PORT"], config["OPTIONS"]) == ("db.example", "6543", {"sslmode": "require"})
    socket_config = env.parse_database_url("postgresql://postgres@/portal?host=/var/run/pg")
    assert socket_config["HOST"] == "/var/run/pg"
    assert socket_config["OPTIONS"] == {}


def test_it_redacts_passwords():
    assert env.redact_url("postgres://u:secret@h/db") == "postgres://u:***@h/db"
    assert env.celery_redis_url("unix:///tmp/r.sock") == "redis+socket:///tmp/r.sock"


def _settings_error(**overrides: str) -> str:
    """Import the settings in a fresh process with `overrides`; return what it printed."""
    environment = {**os.environ, "PORTAL_ENV_FILE": os.devnull, **overrides}
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0, "settings accepted a bad value"
    return result.stderr.strip().splitlines()[-1]


SPIN_PROBE = """
import django, json, os
django.setup()
from providers import registry
before = any("gomp" in line for line in open("/proc/self/maps"))
registry.text_embedder().embed_query("warm")  # OpenMP reads the variable as it loads, here
after = any("gomp" in line for line in open("/proc/self/maps"))
print(json.dumps([os.environ.get("GOMP_SPINCOUNT"), before, after]))
"""


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, "1000"),
        ({"PORTAL_MODEL_SPIN_COUNT": "20"}, "20"),
        ({"GOMP_SPINCOUNT": "5"}, "5"),  # the operator's own choice wins
        ({"OMP_WAIT_POLICY": "passive"}, None),
    ],
)
def test_the_models_threads_spin_briefly_unless_the_environment_says_otherwise(extra, expected):
    # The settings set the spin count before a model library loads OpenMP, or it would not apply.
    environment = {key: value for key, value in os.environ.items() if key not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    result = subprocess.run(
        [sys.executable, "-c", SPIN_PROBE],
        cwd=ROOT,
        env={**environment, "PORTAL_ENV_FILE": os.devnull, **extra},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [expected, False, True]


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DEBUG", "maybe"),
        ("DATABASE_URL", "mysql://root@localhost/portal"),
        ("DATABASE_URL", "postgres://localhost"),
        ("REDIS_URL", "http://localhost:6379"),
        ("PORTAL_MAX_UPLOAD_MB", "lots"),
        ("PORTAL_MAX_UPLOAD_MB", "0"),
        ("PORTAL_SIGNUP", "sometimes"),
        ("SECRET_KEY", "short"),
        ("LOG_LEVEL", "chatty"),
        ("PROVIDER_CHAT", "gpt"),
        ("PROVIDER_OCR", "openai"),
        ("TIMEOUT_CHAT", "soon"),
        ("THREADS_EMBEDDING", "0"),
        ("DIMS_EMBEDDING", "-3"),
        ("PORTAL_MODEL_THREADS", "many"),
    ],
)
def test_it_names_the_variable_with_a_bad_value(variable, value):
    message = _settings_error(**{variable: value})
    assert "ImproperlyConfigured" in message
    assert variable in message


def test_it_keeps_a_generated_secret_key(tmp_path):
    environment = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    environment.update(PORTAL_VAR_DIR=str(tmp_path), PORTAL_ENV_FILE=os.devnull)
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    keys = {
        subprocess.run(
            [sys.executable, "-c", f"import django; django.setup(); {code}"],
            cwd=ROOT,
            env={**environment, "DJANGO_SETTINGS_MODULE": "portal.settings"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for _ in range(2)
    }
    assert len(keys) == 1
    assert len(keys.pop()) >= 50
    assert stat.S_IMODE((tmp_path / "secret_key").stat().st_mode) == 0o600


@pytest.mark.parametrize("command", [["migrate"], ["up", "--port", "0"]])
def test_it_names_database_url_when_the_database_is_unreachable(tmp_path, command):
    environment = {
        **os.environ,
        "PORTAL_ENV_FILE": os.devnull,
        "PORTAL_VAR_DIR": str(tmp_path),
        "DATABASE_URL": "postgresql://portal:hunter2@127.0.0.1:1/portal",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", *command], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert "DATABASE_URL=postgresql://portal:***@127.0.0.1:1/portal" in result.stderr
    assert "hunter2" not in result.stderr + result.stdout


def test_it_names_redis_url_when_redis_is_unreachable(tmp_path):
    environment = {
        **os.environ,
        "PORTAL_ENV_FILE": os.devnull,
        "PORTAL_VAR_DIR": str(tmp_path),
        "REDIS_URL": "redis://127.0.0.1:1/0",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "up", "--port", "0"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "REDIS_URL=redis://127.0.0.1:1/0" in result.stderr


def test_it_offers_single_sign_on_when_an_oidc_issuer_is_configured(db, tmp_path):
    # The provider list also reads configured apps from the database: use the test database.
    environment = {
        **child_env(),
        "PORTAL_ENV_FILE": os.devnull,
        "PORTAL_VAR_DIR": str(tmp_path),
        "PORTAL_OIDC_SERVER_URL": "https://sso.example.com/realms/team",
        "PORTAL_OIDC_CLIENT_ID": "portal",
        "PORTAL_OIDC_NAME": "Company SSO",
    }
    code = (
        "import django; django.setup();"
        "from allauth.socialaccount.adapter import get_adapter;"
        "from django.test import RequestFactory;"
        "providers = get_adapter().list_providers(RequestFactory().get('/'));"
        "print([(p.sub_id, p.name, p.app.settings['server_url']) for p in providers])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "[('oidc', 'Company SSO', 'https://sso.example.com/realms/team')]", result.stderr
    missing_client = _settings_error(PORTAL_OIDC_SERVER_URL="https://sso.example.com/realms/team")
    assert "PORTAL_OIDC_CLIENT_ID" in missing_client
