"""Start-up with PORTAL_STORAGE=s3: wrong keys, a missing bucket and an unreachable endpoint
are errors that name the setting to fix (the system check `migrate` and `check --deploy`
run, and /healthz's storage status), quickly, and without the secret key."""

from __future__ import annotations

import time

import pytest
from django.core.checks import run_checks

from portal.health import storage_status
from tests.stack import free_port
from tests.storage.s3 import new_bucket, use_s3


def storage_errors() -> list[str]:
    found = run_checks(tags=["storage"], include_deployment_checks=True, databases=["default"])
    assert {message.id for message in found} <= {"portal.E002"}
    return [message.msg for message in found]


def test_a_working_bucket_passes(s3_server, settings):
    use_s3(settings, s3_server, new_bucket(s3_server))
    assert storage_errors() == []
    status = storage_status()
    assert status is not None
    assert status.ok


def test_local_files_need_no_check(settings):
    assert storage_status() is None
    assert storage_errors() == []


def test_wrong_keys_name_the_key_settings(s3_server, settings):
    use_s3(settings, s3_server, new_bucket(s3_server), secret_key="not-the-secret-key-at-all")
    (error, *_same) = storage_errors()
    assert "PORTAL_S3_ACCESS_KEY_ID" in error
    assert "PORTAL_S3_SECRET_ACCESS_KEY" in error
    assert "not-the-secret-key-at-all" not in error
    assert s3_server.secret_key not in error
    status = storage_status()
    assert status is not None
    assert not status.ok
    assert "PORTAL_S3_SECRET_ACCESS_KEY" in status.detail


def test_a_missing_bucket_names_the_bucket_setting(s3_server, settings):
    use_s3(settings, s3_server, "no-such-bucket-here")
    (error, *_same) = storage_errors()
    assert "PORTAL_S3_BUCKET" in error
    assert "no-such-bucket-here" in error


def test_an_unreachable_endpoint_names_the_endpoint_setting_quickly(s3_server, settings):
    use_s3(settings, s3_server, "files", endpoint_url=f"http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    (error, *_same) = storage_errors()
    assert "PORTAL_S3_ENDPOINT_URL" in error
    assert time.monotonic() - started < 15


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"PORTAL_STORAGE": "s3"}, "PORTAL_S3_BUCKET"),
        ({"PORTAL_STORAGE": "s3", "PORTAL_S3_BUCKET": "b"}, "PORTAL_S3_ACCESS_KEY_ID"),
        (
            {"PORTAL_STORAGE": "s3", "PORTAL_S3_BUCKET": "b", "PORTAL_S3_ACCESS_KEY_ID": "k"},
            "PORTAL_S3_SECRET_ACCESS_KEY",
        ),
        ({"PORTAL_STORAGE": "disk"}, "PORTAL_STORAGE"),
    ],
)
def test_settings_name_what_is_missing(env, variable):
    """Read by the settings module itself, in a child process as at start-up."""
    import os
    import subprocess
    import sys

    child_env = {k: v for k, v in os.environ.items() if not k.startswith("PORTAL_S3_")} | env
    result = subprocess.run(
        [sys.executable, "-c", "import portal.settings"],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert f"ImproperlyConfigured: {variable}" in result.stderr


def test_healthz_reports_the_object_store(s3_server, settings, client, db):
    """/healthz carries a `storage` entry with PORTAL_STORAGE=s3, naming the key settings when
    the store refuses the keys; with local files it has no such entry. (No worker runs here,
    so /healthz is a 503 whatever the store says: only the entry is checked.)"""
    assert "storage" not in client.get("/healthz").json()
    use_s3(settings, s3_server, new_bucket(s3_server))
    assert client.get("/healthz").json()["storage"]["ok"] is True
    use_s3(settings, s3_server, new_bucket(s3_server), secret_key="not-the-secret-key-at-all")
    response = client.get("/healthz")
    storage = response.json()["storage"]
    assert storage["ok"] is False
    assert "PORTAL_S3_SECRET_ACCESS_KEY" in storage["detail"]
    assert "not-the-secret-key-at-all" not in response.content.decode()


def test_a_cluster_is_warned_about_a_secret_key_generated_per_machine(settings):
    from portal.checks import check_secret_key_shared

    settings.STORAGE_KIND, settings.SECRET_KEY_FROM_ENV = "s3", False
    (warning,) = check_secret_key_shared()
    assert warning.id == "portal.W001"
    assert "SECRET_KEY" in str(warning.hint)
    settings.SECRET_KEY_FROM_ENV = True
    assert check_secret_key_shared() == []
    settings.STORAGE_KIND, settings.SECRET_KEY_FROM_ENV = "local", False
    assert check_secret_key_shared() == []  # one machine: a generated key is fine
