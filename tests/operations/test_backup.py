"""Backups and their restore on real servers: the test database's PostgreSQL, an embedded
PostgreSQL 18 in a folder of its own as the new instance, moto's S3 as its file storage, and
`manage.py backup` / `manage.py restore` run as an operator runs them."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection

from assistant.models import Conversation, MemoryHistory, Message
from audit.models import Action, Entry
from ingestion import actions as ingestion_actions
from knowledge.models import Chunk, Document, Page, stored_file_names
from operations import archive
from operations.actions import do_backup
from operations.archive import ArchiveError
from operations.backup import RestoreRefusedError, counts, make_backup, restore_backup
from operations.tasks import scheduled_backup
from quality import actions as quality_actions
from sources.actions import do_save_source
from sources.crypto import Credentials
from sources.models import Source
from tests.conftest import make_collection
from tests.ingestion.files import ingest, png
from tests.ingestion.runs import drain
from tests.operations.instances import manage, probe, this_instance
from tests.sources.servers import S3Server
from tests.storage.s3 import new_bucket, text_pdf

PASSPHRASE = "correct horse battery staple"
QUERIES = [
    "travel costs refunded",
    "annual leave days",
    "Chapter 2",
    "how many days of leave",
    "parking permit",
    "报销 差旅",
    "red square picture",
    "trip refund within 30 days",
    "remote work policy",
    "leave request form",
]


# --- a portal with content --------------------------------------------------------------------


def _portal_state(alice, bob, team, roots: Path) -> dict[str, Any]:
    """Two users, a team, collections with PDFs and a picture, a source with credentials, two
    index versions (one rolled back), a conversation, memory history, a golden question and
    feedback."""
    handbook = make_collection(alice, "Team handbook", team=team)
    notes = make_collection(bob, "Bob's notes")
    ingest(handbook, "travel.pdf", text_pdf(3))
    ingest(
        handbook,
        "leave.md",
        "# Leave\n\nTwenty days of annual leave a year.\n\n# 请假\n\n差旅报销在三十天内。".encode(),
    )
    ingest(handbook, "red-square.png", png(240, 160, (220, 20, 20)))
    ingest(notes, "parking.md", b"# Parking\n\nA parking permit costs 40 euros a month.")
    (roots / "share").mkdir()
    do_save_source(
        Source(collection=handbook, name="Share", kind="folder", url=str(roots / "share")),
        credentials=Credentials("reader", "s3cret-password"),
    )
    # A second index version built and flipped to, then rolled back from: both are kept.
    ingestion_actions.do_reindex(handbook, enqueue=False)
    drain(handbook)
    ingestion_actions.do_roll_back(handbook)
    conversation = Conversation.objects.create(user=alice, title="Travel")
    Message.objects.create(conversation=conversation, role=Message.Role.USER, content="How fast are trips refunded?")
    answer = Message.objects.create(
        conversation=conversation, role=Message.Role.ASSISTANT, content="Within 10 days of the trip."
    )
    quality_actions.do_give_feedback(alice, answer, "up")
    quality_actions.do_add_golden(
        handbook,
        alice,
        key="q1",
        question="How fast are trips refunded?",
        lang="en",
        gold=[{"file": "travel.pdf", "page": 1}],
    )
    MemoryHistory.objects.create(
        id=uuid.uuid4(), memory_id="m-1", old_memory=None, new_memory="Prefers short answers", event="ADD"
    )
    return {"handbook": handbook, "notes": notes}


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("media")
def test_a_backup_restores_into_a_new_instance_with_its_files_in_s3(
    alice, bob, team, roots, tmp_path, embedded_postgres, s3_server: S3Server
):
    state = _portal_state(alice, bob, team, roots)
    before = probe(this_instance(tmp_path / "var-a"), "alice", *QUERIES)
    assert all(before["searches"]), "every query finds something in the original"
    assert before["sources"] == {"Share": ["reader", "s3cret-password"]}

    passphrase_file = tmp_path / "passphrase"
    passphrase_file.write_text(PASSPHRASE)
    made = manage(
        this_instance(tmp_path / "var-a"),
        "backup",
        "--out",
        str(tmp_path / "backups"),
        "--with-secrets",
        "--passphrase-file",
        str(passphrase_file),
    )
    assert made.returncode == 0, made.stderr
    assert "Dumping the database" in made.stdout
    assert "Files:" in made.stdout
    (path,) = (tmp_path / "backups").glob("portal-backup-*.tar")
    manifest = archive.Reader(path).manifest
    assert manifest["counts"]["documents"] == 4
    assert manifest["secrets"] is True
    assert manifest["migrations"]["knowledge"]
    assert manifest["storage"] == "local"
    # The test server's version: PostgreSQL 15 with DATABASE_URL in CI, the embedded 18 without.
    assert manifest["postgresql"].startswith(f"{connection.pg_version // 10000}.")  # type: ignore[attr-defined]
    assert manifest["pgvector"]
    whole = path.read_bytes()
    assert settings.SECRET_KEY.encode() not in whole
    assert b"s3cret-password" not in whole

    # The new instance: embedded PostgreSQL, files in a bucket, a var folder of its own (so a
    # secret key of its own), migrated as `scripts/run` leaves it.
    bucket = new_bucket(s3_server)
    new = {
        **os.environ,
        "DATABASE_URL": embedded_postgres,
        "PORTAL_VAR_DIR": str(tmp_path / "var-b"),
        "MEDIA_ROOT": str(tmp_path / "var-b" / "media"),
        "PORTAL_STORAGE": "s3",
        "PORTAL_S3_ENDPOINT_URL": s3_server.endpoint_url,
        "PORTAL_S3_BUCKET": bucket,
        "PORTAL_S3_REGION": s3_server.region,
        "PORTAL_S3_ACCESS_KEY_ID": s3_server.access_key,
        "PORTAL_S3_SECRET_ACCESS_KEY": s3_server.secret_key,
        "MEM0_TELEMETRY": "False",
    }
    new.pop("SECRET_KEY", None)
    new.pop("PORTAL_SOURCE_KEYS", None)
    assert manage(new, "migrate", "--noinput").returncode == 0
    restored = manage(new, "restore", str(path), "--passphrase-file", str(passphrase_file))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "Verified: 4 documents" in restored.stdout
    assert "secret key was written" in restored.stdout

    after = probe(new, "alice", *QUERIES)
    # Rolled back: version 1 serves again, version 2 is kept retired.
    assert [row[1:] for row in before["versions"] if row[0] == state["handbook"].pk] == [[1, "active"], [2, "retired"]]
    keys = ("counts", "searches", "sources", "memory_history", "conversations", "versions", "active_versions")
    for key in (*keys, "golden", "feedback"):
        assert after[key] == before[key], key
    assert after["renders"] == before["renders"]
    assert all(status == 200 for status, _digest in after["renders"].values())
    # The restored audit log: the original's entries (the backup's own entry was written after its
    # snapshot, in the original's log) and the restore's.
    assert after["audit"] == sorted([*before["audit"], Action.BACKUP_RESTORE.value])
    assert Entry.objects.filter(action=Action.BACKUP_CREATE, object_id=path.name).exists()

    # And the new instance backs up in turn: PostgreSQL 18's own pg_dump, files from the bucket.
    again = manage(new, "backup", "--out", str(tmp_path / "backups-b"))
    assert again.returncode == 0, again.stderr
    (second,) = (tmp_path / "backups-b").glob("portal-backup-*.tar")
    reader = archive.Reader(second)
    reader.verify()
    assert reader.manifest["postgresql"].startswith("18")
    assert reader.manifest["storage"] == "s3"
    assert reader.manifest["counts"] == after["counts"]
    assert reader.files() == archive.Reader(path).files()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("media")
def test_a_damaged_or_truncated_archive_or_a_wrong_passphrase_changes_nothing(alice, tmp_path):
    collection = make_collection(alice, "Handbook")
    ingest(collection, "travel.pdf", text_pdf(2))
    made = make_backup(tmp_path / "backups", passphrase=PASSPHRASE).path
    before = counts()
    names_before = sorted(stored_file_names())
    data = made.read_bytes()

    damaged = tmp_path / "damaged.tar"
    buffer = bytearray(data)
    at = buffer.index(b"PGDMP") + 200  # inside the database dump
    buffer[at] ^= 0xFF
    damaged.write_bytes(bytes(buffer))
    with pytest.raises(ArchiveError, match=r"database\.dump does not match"):
        restore_backup(damaged, force=True, passphrase=PASSPHRASE)

    truncated = tmp_path / "truncated.tar"
    truncated.write_bytes(data[: data.rindex(b'"members"')])  # cut inside the manifest, written last
    with pytest.raises(ArchiveError, match=r"not a readable backup archive|manifest\.json"):
        restore_backup(truncated, force=True, passphrase=PASSPHRASE)

    with pytest.raises(ArchiveError, match="wrong passphrase"):
        restore_backup(made, force=True, passphrase="not the passphrase")

    assert counts() == before
    assert sorted(stored_file_names()) == names_before
    assert all(default_storage.exists(name) for name in names_before)
    assert not list((tmp_path / "backups").glob("*.part"))
    assert len(list((tmp_path / "backups").glob("*.tar"))) == 1, "no safety backup: nothing was touched"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("media")
def test_a_non_empty_instance_is_refused_and_force_backs_it_up_first(alice, tmp_path, scratch_database):
    collection = make_collection(alice, "Handbook")
    ingest(collection, "leave.md", b"# Leave\n\nTwenty days of annual leave a year.")
    made = make_backup(tmp_path / "backups").path
    with pytest.raises(RestoreRefusedError, match="not empty"):
        restore_backup(made)

    # Into another database that holds a different portal: refused, then forced.
    other = {
        **this_instance(tmp_path / "var-c"),
        "DATABASE_URL": scratch_database,
        "MEDIA_ROOT": str(tmp_path / "media-c"),
    }
    assert manage(other, "migrate", "--noinput").returncode == 0
    seeded = manage(
        other,
        "shell",
        "-c",
        "from tests.conftest import make_user, make_collection; make_collection(make_user('zed'), 'Zed')",
    )
    assert seeded.returncode == 0, seeded.stderr
    refused = manage(other, "restore", str(made))
    assert refused.returncode != 0
    assert "not empty (1 collections)" in refused.stderr
    forced = manage(other, "restore", str(made), "--force", "--safety-dir", str(tmp_path / "safety"))
    assert forced.returncode == 0, forced.stdout + forced.stderr
    (safety,) = (tmp_path / "safety").glob("portal-backup-*.tar")
    assert archive.Reader(safety).manifest["counts"]["collections"] == 1
    assert "Verified: 1 documents" in forced.stdout


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("media")
def test_a_backup_taken_while_documents_arrive_is_consistent(alice, tmp_path, scratch_database):
    collection = make_collection(alice, "Handbook")
    ingest(collection, "first.pdf", text_pdf(2))
    stop = threading.Event()
    added: list[int] = []

    def upload() -> None:
        from django.db import connections

        try:
            number = 0
            while not stop.is_set() and number < 30:
                number += 1
                document = ingest(collection, f"doc-{number}.pdf", text_pdf(2 + number % 3))
                added.append(document.pk)
        finally:
            connections.close_all()

    worker = threading.Thread(target=upload)
    worker.start()
    try:
        from tests.stack import wait_for

        wait_for(lambda: len(added) >= 1, 120, "a first upload during the test")
        made = make_backup(tmp_path / "backups").path
    finally:
        stop.set()
        worker.join(timeout=300)
    manifest = archive.Reader(made).manifest
    assert 2 <= manifest["counts"]["documents"] <= Document.objects.count()

    target = {
        **this_instance(tmp_path / "var-d"),
        "DATABASE_URL": scratch_database,
        "MEDIA_ROOT": str(tmp_path / "media-d"),
    }
    restored = manage(target, "restore", str(made))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    check = manage(
        target,
        "shell",
        "-c",
        "from django.core.files.storage import default_storage as s; from knowledge.models import stored_file_names; "
        "names = list(stored_file_names()); print(len(names), sum(not s.exists(n) for n in names))",
    )
    assert check.returncode == 0, check.stderr
    stored, missing = map(int, check.stdout.strip().splitlines()[-1].split())
    # Every row's file came along (the stored names of the snapshot), none more.
    assert stored == manifest["files"]["count"] > 0
    assert missing == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("media")
def test_scheduled_backups_keep_the_newest_and_are_audited(alice, tmp_path, settings):
    make_collection(alice, "Handbook")
    settings.BACKUP_DIR = tmp_path / "scheduled"
    settings.BACKUP_KEEP = 2
    made = [scheduled_backup() for _ in range(3)]
    kept = sorted(path.name for path in settings.BACKUP_DIR.glob("portal-backup-*.tar"))
    assert kept == sorted(Path(path).name for path in made[1:])
    entries = Entry.objects.filter(action=Action.BACKUP_CREATE).order_by("pk")
    assert entries.count() == 3
    last = entries.last()
    assert last is not None
    assert last.changes["pruned"][0] == [Path(made[0]).name]
    assert last.actor is None


@pytest.mark.django_db(transaction=True)
def test_without_a_passphrase_secrets_are_refused_and_never_written(tmp_path, settings):
    environ = {key: value for key, value in os.environ.items() if key != "PORTAL_BACKUP_PASSPHRASE"}
    environ["PORTAL_VAR_DIR"] = str(tmp_path / "var")
    result = manage(environ, "backup", "--out", str(tmp_path / "out"), "--with-secrets")
    assert result.returncode != 0
    assert "passphrase" in result.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
    (tmp_path / "short").write_text("short")
    result = manage(
        environ,
        "backup",
        "--out",
        str(tmp_path / "out"),
        "--with-secrets",
        "--passphrase-file",
        str(tmp_path / "short"),
    )
    assert result.returncode != 0
    assert "at least 10 characters" in result.stderr


@pytest.mark.django_db(transaction=True)
def test_chunks_and_vectors_are_counted(alice, tmp_path):
    collection = make_collection(alice, "Handbook")
    ingest(collection, "leave.md", b"# Leave\n\nTwenty days of annual leave a year.")
    counted = counts()
    assert counted["documents"] == 1
    assert counted["pages"] == Page.objects.count()
    assert counted["vectors"] >= Chunk.objects.filter(embedding__isnull=False).count() > 0
    made = do_backup(tmp_path / "b")
    assert made.manifest["counts"] == counted


def test_beat_schedules_backups_only_with_a_folder(settings):
    from portal.celery import _schedule_backups, app

    app.conf.beat_schedule.pop("backup", None)
    settings.BACKUP_DIR = None
    _schedule_backups(app)
    assert "backup" not in app.conf.beat_schedule
    settings.BACKUP_DIR = Path("/srv/backups")
    settings.BACKUP_EVERY_HOURS = 6
    try:
        _schedule_backups(app)
        assert app.conf.beat_schedule["backup"] == {"task": "operations.backup", "schedule": 6 * 3600.0}
    finally:
        app.conf.beat_schedule.pop("backup", None)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("media")
def test_a_database_that_cannot_be_restored_is_left_as_it_was_and_its_files_are_taken_back(
    alice, tmp_path, scratch_database
):
    """The dump creates a schema the target already has: psql stops, its one transaction rolls
    back, and the files the restore had put in place are deleted again."""
    collection = make_collection(alice, "Handbook")
    ingest(collection, "leave.md", b"# Leave\n\nTwenty days of annual leave a year.")
    with connection.cursor() as cursor:
        cursor.execute("CREATE SCHEMA extra; CREATE TABLE extra.notes (id int)")
        # Far more SQL after the failing statement than a pipe holds: pg_restore must be
        # stopped, not left waiting to write it (the restore hung in CI before it was).
        cursor.execute("INSERT INTO extra.notes SELECT generate_series(1, 200000)")
    try:
        made = make_backup(tmp_path / "backups").path
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP SCHEMA extra CASCADE")
    target = {
        **this_instance(tmp_path / "var-e"),
        "DATABASE_URL": scratch_database,
        "MEDIA_ROOT": str(tmp_path / "media-e"),
    }
    assert manage(target, "migrate", "--noinput").returncode == 0
    with psycopg.connect(scratch_database, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA extra; CREATE TABLE extra.notes (id int)")
        tables_before = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
        migrations_before = conn.execute("SELECT count(*) FROM django_migrations").fetchone()
    failed = manage(target, "restore", str(made))
    assert failed.returncode != 0
    assert 'schema "extra" already exists' in failed.stderr
    assert "Files: 1/1." in failed.stdout  # they were in place before the database failed
    with psycopg.connect(scratch_database, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == tables_before
        assert conn.execute("SELECT count(*) FROM django_migrations").fetchone() == migrations_before
        assert conn.execute("SELECT count(*) FROM knowledge_document").fetchone() == (0,)
    left = [path for path in (tmp_path / "media-e").rglob("*") if path.is_file()]
    assert left == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("media")
def test_a_signed_archive_restores_only_with_its_key(alice, tmp_path, scratch_database):
    """The operator's flow: backups signed with PORTAL_BACKUP_SIGNING_KEY, restored where the
    same key is set; another key, or no signature, is refused before anything is touched."""
    key, other = "a-signing-key-kept-apart-from-the-archives", "another-portal-s-signing-key-0123456789"
    collection = make_collection(alice, "Handbook")
    ingest(collection, "leave.md", b"# Leave\n\nTwenty days of annual leave a year.")
    here = {**this_instance(tmp_path / "var"), "PORTAL_BACKUP_SIGNING_KEY": key}
    made = manage(here, "backup", "--out", str(tmp_path / "signed"))
    assert made.returncode == 0, made.stderr
    assert f"Signed with the key {archive.key_id(key)}." in made.stdout
    (signed,) = (tmp_path / "signed").glob("portal-backup-*.tar")
    unsigned = make_backup(tmp_path / "unsigned").path
    target = {**here, "DATABASE_URL": scratch_database, "MEDIA_ROOT": str(tmp_path / "media-s")}

    checked = manage(target, "restore", "--check", str(signed))
    assert checked.returncode == 0, checked.stderr
    assert f"can be restored here (signed with this portal's key ({archive.key_id(key)}))" in checked.stdout

    wrong = manage({**target, "PORTAL_BACKUP_SIGNING_KEY": other}, "restore", str(signed))
    assert wrong.returncode != 0
    assert f"signed with another key ({archive.key_id(key)}; this portal's is {archive.key_id(other)})" in wrong.stderr
    refused = manage(target, "restore", str(unsigned))
    assert refused.returncode != 0
    assert "The archive is not signed, and PORTAL_BACKUP_SIGNING_KEY is set" in refused.stderr
    with psycopg.connect(scratch_database, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (0,)
    allowed = manage(target, "restore", "--check", "--allow-unsigned", str(unsigned))
    assert allowed.returncode == 0, allowed.stderr
    assert "can be restored here (not signed)" in allowed.stdout

    restored = manage(target, "restore", str(signed))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert f"Signature: signed with this portal's key ({archive.key_id(key)})." in restored.stdout
    assert "Verified: 1 documents" in restored.stdout
