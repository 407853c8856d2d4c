"""Restoring archives made to attack the portal: dumps written by pg_dump from an attacker's own
database, or a portal's dump with some SQL rewritten, in an archive whose manifest matches
them. What the table of contents shows is refused before anything runs; what it hides runs
as a role that is not a superuser and is found in the catalogs before it commits."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection
from psycopg.conninfo import conninfo_to_dict

from knowledge.models import stored_file_names
from operations import archive
from operations.archive import ArchiveError
from operations.backup import RestoreRefusedError, counts, make_backup, restore_backup
from operations.postgres import PostgresError
from operations.restoring import DumpRefusedError
from tests.conftest import make_collection
from tests.ingestion.files import ingest
from tests.operations.hostile import (
    PROGRAM_FROM_A_CONSTRAINT,
    dump_of,
    entry_sql,
    pwned_path,
    rewrite,
    this_database,
    with_dump,
)
from tests.operations.instances import manage, this_instance

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("media")]

SPY = (
    b"RESET SESSION AUTHORIZATION;\nRESET ROLE;\n"
    b"CREATE TABLE public.restore_spy AS SELECT pg_catalog.current_setting('is_superuser') AS superuser,"
    b" session_user::text AS login;\n"
)


@pytest.fixture
def portal(alice, tmp_path) -> Path:
    """This instance with a collection and a document, and a real backup of it."""
    ingest(make_collection(alice, "Handbook"), "leave.md", b"# Leave\n\nTwenty days of annual leave a year.")
    return make_backup(tmp_path / "made").path


@pytest.fixture
def pwned() -> Iterator[Path]:
    path = pwned_path()
    yield path
    path.unlink(missing_ok=True)


def _state() -> dict[str, Any]:
    """What a refused restore must leave as it was: the rows, the files, who owns `public`,
    and no role of a restore left behind."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'public'")
        owner = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM pg_roles WHERE rolname LIKE 'portal\\_restore\\_%'")
        roles = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        tables = cursor.fetchone()[0]
    names = sorted(stored_file_names())
    return {
        "counts": counts(),
        "files": names,
        "stored": [default_storage.exists(name) for name in names],
        "media": sorted(str(path) for path in Path(settings.MEDIA_ROOT).rglob("*") if path.is_file()),
        "public": owner,
        "restore roles": roles,
        "tables": tables,
    }


def _disguised(dump: bytes, kind: bytes = b"FUNCTION") -> bytes:
    """The dump with its functions labelled SEQUENCE in the table of contents."""
    return rewrite(dump, kind, b"SEQUENCE")


def test_it_refuses_a_dump_whose_constraint_runs_a_program_before_running_anything(
    portal, tmp_path, scratch_database, pwned
):
    dump = dump_of(scratch_database, PROGRAM_FROM_A_CONSTRAINT.format(target=pwned), tmp_path / "evil.dump")
    crafted = with_dump(portal, dump.read_bytes(), tmp_path / "crafted.tar")
    archive.Reader(crafted).verify()  # the manifest vouches for it: it proves nothing
    before = _state()
    with pytest.raises(
        DumpRefusedError, match=r"never does \(FUNCTION public audit_row\(text\)\); nothing of it was run"
    ):
        restore_backup(crafted, force=True, safety_dir=tmp_path / "safety")
    assert not pwned.exists()
    assert _state() == before
    assert not (tmp_path / "safety").exists(), "refused before this instance was even backed up"


def test_it_refuses_a_dump_owning_objects_as_another_role(portal, tmp_path, scratch_database):
    other = f"portal_other_{uuid.uuid4().hex[:8]}"
    statements = (
        f'CREATE EXTENSION vector; CREATE ROLE "{other}"; CREATE TABLE public.knowledge_note (id integer);'
        f'CREATE TABLE public.knowledge_extra (id integer); ALTER TABLE public.knowledge_extra OWNER TO "{other}";'
    )
    try:
        dump = dump_of(scratch_database, statements, tmp_path / "owners.dump")
    finally:
        with psycopg.connect(scratch_database, autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{other}"; DROP ROLE "{other}"')
    crafted = with_dump(portal, dump.read_bytes(), tmp_path / "crafted.tar")
    before = _state()
    with pytest.raises(DumpRefusedError, match=rf"objects belong to 2 roles \(({other}, postgres|postgres, {other})\)"):
        restore_backup(crafted, force=True, safety_dir=tmp_path / "safety")
    assert _state() == before


def test_past_the_table_of_contents_the_program_is_refused_by_the_database(portal, tmp_path, scratch_database, pwned):
    """The function is labelled a SEQUENCE: the table of contents shows nothing it refuses,
    and its SQL runs. It runs as a role that may not run programs, so the restore fails, in
    one transaction."""
    dump = dump_of(scratch_database, PROGRAM_FROM_A_CONSTRAINT.format(target=pwned), tmp_path / "evil.dump")
    crafted = with_dump(portal, _disguised(dump.read_bytes()), tmp_path / "crafted.tar")
    before = _state()
    # PostgreSQL 15 says "must be superuser or have privileges of …", 18 "Only roles with
    # privileges of the "pg_execute_server_program" role may …": the embedded test server is 18.
    with pytest.raises(PostgresError, match="pg_execute_server_program"):
        restore_backup(crafted, force=True, safety_dir=tmp_path / "safety")
    assert not pwned.exists()
    assert _state() == before


@pytest.mark.parametrize(
    ("statements", "disguise", "found"),
    [
        (
            "CREATE FUNCTION public.helper() RETURNS integer LANGUAGE sql SECURITY DEFINER AS 'SELECT 1';",
            True,
            r"function public\.helper\(\)",
        ),
        (
            "CREATE TABLE public.knowledge_note (body text DEFAULT pg_catalog.pg_read_file('/etc/hostname'));",
            False,
            r"a call of pg_read_file\(text\) in a default of public\.knowledge_note",
        ),
    ],
    ids=["security-definer-function", "default-reading-a-server-file"],
)
def test_what_the_table_of_contents_does_not_show_is_found_before_it_commits(
    portal, tmp_path, scratch_database, statements, disguise, found
):
    """A superuser-owned SECURITY DEFINER function, or a default that only a superuser may
    run: after the restore, the portal's user (a superuser in the embedded mode) would run
    them."""
    dump = dump_of(scratch_database, "CREATE EXTENSION vector;" + statements, tmp_path / "slipped.dump").read_bytes()
    crafted = with_dump(portal, _disguised(dump) if disguise else dump, tmp_path / "crafted.tar")
    before = _state()
    with pytest.raises(DumpRefusedError, match=f"The dump created what a portal's database never holds: {found}"):
        restore_backup(crafted, force=True, safety_dir=tmp_path / "safety")
    assert _state() == before


def test_a_dump_that_leaves_a_copy_open_commits_nothing(portal, tmp_path, scratch_database):
    """Its last SQL starts a COPY that takes in everything after it, the restore's own final
    check and commit included: psql reaches the end of its input with nothing committed."""
    dump = dump_of(
        scratch_database,
        "CREATE EXTENSION vector; CREATE TABLE public.knowledge_sink (line text);"
        "CREATE INDEX knowledge_sink_line ON public.knowledge_sink (line);",
        tmp_path / "open.dump",
    ).read_bytes()
    index = entry_sql(dump, b"CREATE INDEX knowledge_sink_line ON public.knowledge_sink")
    crafted = with_dump(
        portal, rewrite(dump, index, index + b"COPY public.knowledge_sink (line) FROM stdin;\n"), tmp_path / "c.tar"
    )
    before = _state()
    with pytest.raises(PostgresError, match=r"did not end where it should .* nothing was committed"):
        restore_backup(crafted, force=True, safety_dir=tmp_path / "safety")
    assert _state() == before


def test_a_dump_that_commits_on_its_own_leaves_nothing_it_made(portal, tmp_path, scratch_database):
    """`COMMIT` in the dump's SQL ends the restore's transaction early: what it made is then
    found after the restore and dropped, and the restore fails (the instance's tables are
    gone by then, which is why --force backs it up first)."""
    dump = dump_of(
        scratch_database,
        "CREATE EXTENSION vector; CREATE FUNCTION public.helper() RETURNS integer LANGUAGE sql SECURITY DEFINER "
        "AS 'SELECT 1'; CREATE TABLE public.knowledge_note (id integer);",
        tmp_path / "committing.dump",
    ).read_bytes()
    function = entry_sql(dump, b"CREATE FUNCTION public.helper()")
    dump = _disguised(rewrite(dump, function, function + b"\nCOMMIT;\nBEGIN;\n"))
    crafted = with_dump(portal, dump, tmp_path / "crafted.tar")
    target = {**this_instance(tmp_path / "var"), "DATABASE_URL": scratch_database, "MEDIA_ROOT": str(tmp_path / "m")}
    with psycopg.connect(scratch_database, autocommit=True) as conn:
        conn.execute("DROP FUNCTION public.helper(); DROP TABLE public.knowledge_note")
    restored = manage(target, "restore", str(crafted))
    assert restored.returncode != 0
    assert "never holds (function public.helper()) and committed it on its own" in restored.stderr
    with psycopg.connect(scratch_database, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM pg_proc WHERE proname = 'helper'").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM pg_roles WHERE rolname LIKE 'portal\\_restore\\_%'").fetchone() == (
            0,
        )


def _spied(portal: Path, tmp_path: Path) -> Path:
    """The portal's own database dumped again, one table's SQL preceded by SPY."""
    dump = dump_of(this_database(), "", tmp_path / "again.dump").read_bytes()
    table = entry_sql(dump, b"CREATE TABLE public.django_session (")
    return with_dump(portal, rewrite(dump, table, SPY + table), tmp_path / "spied.tar")


def _restore_spied(spied: Path, environ: dict[str, str], database_url: str) -> tuple[str, str, set[str]]:
    restored = manage(environ, "restore", str(spied))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "Verified: 1 documents" in restored.stdout
    with psycopg.connect(database_url, autocommit=True) as conn:
        seen = conn.execute("SELECT superuser, login FROM restore_spy").fetchone()
        owners = {row[0] for row in conn.execute("SELECT tableowner FROM pg_tables WHERE schemaname = 'public'")}
        leftover = conn.execute("SELECT count(*) FROM pg_roles WHERE rolname LIKE 'portal\\_restore\\_%'").fetchone()
    assert leftover == (0,)
    assert seen is not None
    return seen[0], seen[1], owners


def test_the_dump_runs_without_superuser_even_where_it_resets_its_role(portal, tmp_path, scratch_database):
    """The portal's user is a superuser (the embedded mode, CI): the dump's SQL runs in a
    session that logged in as a one-time role, so `RESET ROLE` and `RESET SESSION
    AUTHORIZATION` lead nowhere, and its tables are the portal's user's afterwards."""
    target = {**this_instance(tmp_path / "var"), "DATABASE_URL": scratch_database, "MEDIA_ROOT": str(tmp_path / "m")}
    superuser, login, owners = _restore_spied(_spied(portal, tmp_path), target, scratch_database)
    assert superuser == "off"
    assert login.startswith("portal_restore_")
    assert owners == {connection.settings_dict["USER"]}


def test_a_portal_whose_database_user_is_no_superuser_restores_as_that_user(portal, tmp_path, scratch_database):
    """A managed PostgreSQL: the portal's user owns its database but is no superuser, and an
    operator created the vector extension for it. The restore keeps that extension (the dump
    may not make one) and runs as the portal's user."""
    role, password = f"portal_plain_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    database = f"plain_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(scratch_database, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{password}'")
        conn.execute(f'CREATE DATABASE "{database}" OWNER "{role}"')
    try:
        scratch = conninfo_to_dict(scratch_database)["dbname"]
        admin = scratch_database.replace(f"/{scratch}", f"/{database}", 1)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        url = admin.replace(f"{connection.settings_dict['USER']}@", f"{role}:{password}@", 1)
        target = {**this_instance(tmp_path / "var"), "DATABASE_URL": url, "MEDIA_ROOT": str(tmp_path / "m")}
        superuser, login, owners = _restore_spied(_spied(portal, tmp_path), target, admin)
        assert (superuser, login, owners) == ("off", role, {role})
    finally:
        with psycopg.connect(scratch_database, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def test_on_the_embedded_server_the_dump_runs_without_superuser_too(portal, tmp_path, embedded_postgres, pwned):
    """The embedded PostgreSQL 18 of `scripts/run`, a superuser's: the program that the
    disguised function runs is refused, and the spy sees a login without superuser."""
    target = {
        **os.environ,
        "DATABASE_URL": embedded_postgres,
        "PORTAL_VAR_DIR": str(tmp_path / "var"),
        "MEDIA_ROOT": str(tmp_path / "m"),
        "MEM0_TELEMETRY": "False",
    }
    with psycopg.connect(embedded_postgres, autocommit=True) as conn:
        conn.execute("CREATE DATABASE crafting")
    crafting = embedded_postgres.replace("/portal?", "/crafting?", 1)
    dump = dump_of(crafting, PROGRAM_FROM_A_CONSTRAINT.format(target=pwned), tmp_path / "evil.dump")
    crafted = with_dump(portal, _disguised(dump.read_bytes()), tmp_path / "crafted.tar")
    refused = manage(target, "restore", str(crafted))
    assert refused.returncode != 0
    assert "pg_execute_server_program" in refused.stderr
    assert not pwned.exists()

    superuser, login, owners = _restore_spied(_spied(portal, tmp_path), target, embedded_postgres)
    assert superuser == "off"
    assert login.startswith("portal_restore_")
    assert owners == {"postgres"}


def test_an_archive_over_the_size_bound_is_refused_before_anything_is_written(portal, tmp_path, settings):
    writer = archive.Writer(tmp_path / "big.tar")
    writer.add_bytes(archive.DATABASE, archive.Reader(portal).read(archive.DATABASE))
    writer.add_bytes(archive.FILES + "collections/1/originals/ab/big", os.urandom(3 << 20))
    big = writer.close({"counts": {}, "files": {"count": 1}})
    settings.RESTORE_MAX_MB = 2
    before = _state()
    with pytest.raises(ArchiveError, match=r"files/collections/1/originals/ab/big has 3145728 bytes, more than the"):
        restore_backup(big, force=True, safety_dir=tmp_path / "safety")
    assert _state() == before
    assert not (tmp_path / "safety").exists()


def test_an_archive_that_would_not_fit_on_the_disk_is_refused(portal, tmp_path, monkeypatch):
    """The free space as the operating system would report it on a nearly full disk."""
    real = shutil.disk_usage
    monkeypatch.setattr("operations.checking.shutil.disk_usage", lambda path: real(path)._replace(free=300 << 20))
    with pytest.raises(RestoreRefusedError, match=r"need [\d.]+ MB in .*, which has 300\.0 MB free"):
        restore_backup(portal, force=True, safety_dir=tmp_path / "safety")
    assert not (tmp_path / "safety").exists()
