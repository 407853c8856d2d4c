"""alice owns things, bob shares a team with her, charlie has no access (healthchecks
`hc/test.py`). Tests run on real PostgreSQL + pgvector and real Redis."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher, make_password
from django.test import override_settings
from rest_framework.test import APIClient

from knowledge import actions
from knowledge.models import Collection, Membership, Role, Team
from tests.stack import celery_worker, daphne, free_port, http_ok, wait_for

os.environ.setdefault("MEM0_TELEMETRY", "False")

PASSWORD = "correct horse battery staple"


class OneRoundHasher(PBKDF2PasswordHasher):
    """The portal's hasher (PBKDF2-SHA256) with one round instead of a million: each hash and
    each password checked at a login cost 0.3-0.6 s on 2 cores, and the lockout tests alone
    try about sixty logins. The stored form names its rounds, so live daphne processes, with
    the real hasher, check these passwords too (and strengthen them at the first login)."""

    iterations = 1


@pytest.fixture(scope="session", autouse=True)
def _passwords_hashed_in_one_round() -> Iterator[None]:
    with override_settings(PASSWORD_HASHERS=[f"{__name__}.OneRoundHasher"]):
        yield


@functools.cache
def _password_hash() -> str:
    """PASSWORD hashed once: most tests make three users."""
    return make_password(PASSWORD)


# Modules whose tests read a corpus with the real local models, or spawn processes: seconds
# each (measured with --durations=0). `scripts/test --quick` leaves them out, with the stack
# and browser tests; the whole suite (CI) runs them all.
SLOW_MODULES = frozenset(
    {
        "tests/assistant/test_answering.py",
        "tests/assistant/test_answering_local.py",
        "tests/assistant/test_evaluate.py",
        "tests/assistant/test_memory_local.py",
        "tests/assistant/test_retrieval.py",
        "tests/ingestion/test_formats_pipeline.py",
        "tests/ingestion/test_parsers.py",
        "tests/ingestion/test_pictures.py",
        "tests/ingestion/test_pipeline.py",
        "tests/ingestion/test_reading_order.py",
        "tests/ingestion/test_versions.py",
        "tests/ingestion/test_vision_captions.py",
        "tests/operations/test_backup.py",
        "tests/operations/test_upgrade.py",
        "tests/portal/test_settings.py",
        "tests/providers/test_local_models.py",
        "tests/sources/test_live_sync.py",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.nodeid.split("::")[0]
        if module in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
        if module.startswith("tests/ui/"):
            item.add_marker(pytest.mark.browser)


def make_user(name: str, **extra: object):
    user = get_user_model().objects.create_user(username=name, email=f"{name}@example.com", password=None, **extra)
    user.password = _password_hash()
    user.save(update_fields=["password"])
    return user


def make_collection(owner, name: str = "Handbook", team: Team | None = None) -> Collection:
    return actions.do_create_collection(owner, name, team=team)


@pytest.fixture(scope="session", autouse=True)
def _static_files_found_when_asked() -> None:
    """Django's test client builds the middleware anew for every client, and WhiteNoise, with
    no collectstatic (WHITENOISE_USE_FINDERS), reads every static file's headers when it is
    built: 38 ms for each test with a client, a tenth of the quick step's time. In its
    autorefresh mode it looks a file up when one is asked for; what it serves is the same."""
    from django.conf import settings

    settings.WHITENOISE_AUTOREFRESH = True


@pytest.fixture(scope="session", autouse=True)
def _memory_connections_closed(django_db_setup, django_db_blocker):
    """mem0 keeps its own connection pool: close it before the test database is dropped."""
    yield
    from assistant.memory import service

    service.close()


@pytest.fixture(autouse=True)
def _cache_cleared():
    """Django's cache is in Redis (settings.CACHES) and outlives a test: allauth's counts of
    failed logins would lock the next test's users out. Only the cache's own keys go; Celery
    and Channels share the database, so never FLUSHDB (which `cache.clear()` is)."""
    from django.core.cache import cache

    client = cache._cache.get_client(write=True)  # type: ignore[attr-defined]
    keys = list(client.scan_iter(match=f"{cache.key_prefix}:*", count=1000))
    if keys:
        client.delete(*keys)


@pytest.fixture
def alice(db):
    return make_user("alice")


@pytest.fixture
def bob(db):
    return make_user("bob")


@pytest.fixture
def charlie(db):
    return make_user("charlie")


@pytest.fixture
def team(alice, bob) -> Team:
    """alice's team; bob is a viewer (tests promote him where needed)."""
    team = actions.do_create_team(alice, "Research")
    actions.do_add_member(team, bob, Role.VIEWER)
    return team


def set_role(team: Team, user, role: Role) -> None:
    Membership.objects.filter(team=team, user=user).update(role=role)


@pytest.fixture
def private_collection(alice) -> Collection:
    return make_collection(alice, "Alice's notes")


@pytest.fixture
def team_collection(alice, team) -> Collection:
    return make_collection(alice, "Team handbook", team=team)


@pytest.fixture
def media(settings, tmp_path):
    """The test's own MEDIA_ROOT, so that stored files go to its tmp_path (and the live
    processes it starts are given it). Modules that store files say
    `pytestmark = pytest.mark.usefixtures("media")`."""
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def api():
    """An API client; call `api.force_login(user)` or `token_for(api, user)`."""
    return APIClient()


def token_for(api: APIClient, user) -> str:
    _token, key = actions.do_create_token(user, "tests")
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return key


@pytest.fixture
def live_worker(tmp_path):
    """A real Celery worker process on the test database and Redis."""
    log = tmp_path / "worker.log"
    with celery_worker(log) as proc:
        wait_for(lambda: b"ready." in log.read_bytes() or proc.poll() is not None, 60, "worker start", log)
        assert proc.poll() is None, log.read_text()
        yield proc


@pytest.fixture
def live_web(tmp_path):
    """A real daphne process serving the portal on the test database; yields its port.
    Tests using it need `django_db(transaction=True)` so that it sees their rows."""
    port = free_port()
    log = tmp_path / "daphne.log"
    with daphne(log, port) as proc:
        wait_for(lambda: http_ok(f"http://127.0.0.1:{port}/healthz") or proc.poll() is not None, 60, "daphne", log)
        assert proc.poll() is None, log.read_text()
        yield port
