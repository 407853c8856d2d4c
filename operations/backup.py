"""A backup of the whole portal while it runs, and its restore into an empty instance.

Consistency: the database is dumped from an exported snapshot of one repeatable-read
transaction, and the list of stored files to copy, the counts and the migration state are
read in that same transaction. Files are copied after the dump: one written later is left
out because no dumped row names it, and every dumped row's file is in the archive (unless
it was deleted meanwhile, which the manifest records as missing).

Restore: the archive's signature, the sizes of its members against the free space, every
member's checksum and the dump's table of contents (operations/restoring.py) are checked
before anything is touched; the files go into the configured storage first (those added are
removed again if the database cannot be restored), then the database is replaced in one
transaction by a role that is not a superuser, the migrations of this code run, and the
result is compared with the manifest.

django-dbbackup was considered: it dumps the database and the media in two separate
commands and archives, encrypts with GPG, and keeps no manifest, so neither the snapshot
shared by rows and files nor a check before restoring would come from it."""

from __future__ import annotations

import datetime as dt
import os
import random
import subprocess
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from assistant.models import Conversation, MemoryHistory
from common.storage import is_object_store, open_stream, sha256_of
from knowledge.models import Chunk, Collection, Document, Page, stored_file_names
from operations import archive, checking, postgres, restoring
from operations.archive import ArchiveError
from operations.checking import RestoreRefusedError, Say, quiet
from portal.models import User

# Stored files whose SHA-256 a restore reads back from the storage and compares.
VERIFY_SAMPLE = 20
# What the manifest counts and a restore must find again.
COUNTED = ("documents", "pages", "chunks", "vectors")


@dataclass
class Made:
    path: Path
    manifest: dict[str, Any]


@dataclass
class Restored:
    manifest: dict[str, Any]
    counts: dict[str, int]
    files: int
    checked_files: int
    secrets: bool
    safety_backup: Path | None = None
    notes: list[str] = field(default_factory=list)


def portal_version() -> dict[str, str]:
    """The portal's version (pyproject) and, in a Git checkout, its commit."""
    base = Path(settings.BASE_DIR)
    try:
        version = tomllib.loads((base / "pyproject.toml").read_text())["project"]["version"]
    except (OSError, KeyError, ValueError):
        version = ""
    commit = os.environ.get("PORTAL_COMMIT", "")
    if not commit and (base / ".git").exists():
        try:
            commit = subprocess.run(
                ["git", "-C", str(base), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            commit = ""
    return {"version": str(version), "commit": commit}


def counts() -> dict[str, int]:
    """What a restore must find again, as the current transaction sees it."""
    return {
        "users": User.objects.count(),
        "collections": Collection.objects.count(),
        "documents": Document.objects.count(),
        "pages": Page.objects.count(),
        "chunks": Chunk.objects.count(),
        "vectors": Chunk.objects.filter(embedding__isnull=False).count()
        + Chunk.objects.filter(image_embedding__isnull=False).count(),
        "conversations": Conversation.objects.count(),
        "memory_history": MemoryHistory.objects.count(),
    }


def applied_migrations() -> dict[str, list[str]]:
    applied: dict[str, list[str]] = {}
    for app, name in sorted(MigrationRecorder(connection).applied_migrations()):
        applied.setdefault(app, []).append(name)
    return applied


def holdings() -> dict[str, int]:
    """What an instance holds that a restore would replace: none of it in an empty one (an
    operator's first admin, made by ensure_admin, does not count)."""
    if Collection._meta.db_table not in connection.introspection.table_names():
        return {}  # not even migrated
    return {
        "collections": Collection.objects.count(),
        "documents": Document.objects.count(),
        "conversations": Conversation.objects.count(),
    }


def _archive_name(out_dir: Path) -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    path = out_dir / f"portal-backup-{stamp}.tar"
    number = 2
    while path.exists():
        path = out_dir / f"portal-backup-{stamp}-{number}.tar"
        number += 1
    return path


def _size(bytes_: int) -> str:
    return f"{bytes_ / (1 << 20):.1f} MB"


def make_backup(out_dir: Path, *, passphrase: str | None = None, say: Say = quiet) -> Made:
    """Writes one archive into `out_dir`. With `passphrase`, the secret key and source keys
    go in too, encrypted with it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    client = postgres.client_for(postgres.server_major())
    path = _archive_name(out_dir)
    writer = archive.Writer(path, signing_key=settings.BACKUP_SIGNING_KEY)
    try:
        with tempfile.TemporaryDirectory(dir=out_dir, prefix=".dump-") as scratch:
            dump_path = Path(scratch) / archive.DATABASE
            with postgres.exported_snapshot() as snapshot:
                names = sorted(set(stored_file_names()))
                counted = counts()
                migrations = applied_migrations()
                facts = postgres.server_facts()
                say(f"Dumping the database (PostgreSQL {facts['postgresql']}, pg_dump {client.major})…")
                postgres.dump(dump_path, snapshot=snapshot, client=client)
            size = dump_path.stat().st_size
            with dump_path.open("rb") as stream:
                writer.add(archive.DATABASE, stream, size)
            say(f"Database: {_size(size)}.")
        missing, copied, total_bytes = _copy_files(writer, names, say)
        if passphrase:
            keys = {"secret_key": settings.SECRET_KEY, "source_keys": list(settings.SOURCE_KEYS)}
            writer.add_bytes(archive.SECRETS, archive.seal(keys, passphrase))
            say("Secrets: the secret key and source keys, encrypted with the passphrase.")
        manifest = {
            "portal": portal_version(),
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "migrations": migrations,
            **facts,
            "pg_dump": client.major,
            "storage": "s3" if is_object_store(default_storage) else "local",
            "files": {"count": copied, "bytes": total_bytes, "missing": missing},
            "counts": counted,
            "secrets": bool(passphrase),
        }
        writer.close(manifest)
    except BaseException:
        writer.abandon()
        raise
    say(f"Wrote {path} ({_size(path.stat().st_size)}).")
    return Made(path, {**manifest, "members": writer.members})


def _copy_files(writer: archive.Writer, names: list[str], say: Say) -> tuple[list[str], int, int]:
    missing: list[str] = []
    copied = total = 0
    for number, name in enumerate(names, start=1):
        try:
            size = default_storage.size(name)
            stream = open_stream(default_storage, name)
        except FileNotFoundError:  # deleted since the dump (its row too, by now)
            missing.append(name)
            continue
        try:
            writer.add(archive.FILES + name, stream, size)
        finally:
            stream.close()
        copied += 1
        total += size
        if number % 100 == 0 or number == len(names):
            say(f"Files: {number}/{len(names)} ({_size(total)}).")
    if missing:
        say(f"{len(missing)} file(s) were deleted after the dump and are not in the archive.")
    if settings.BACKUP_SIGNING_KEY:
        say(f"Signed with the key {archive.key_id(settings.BACKUP_SIGNING_KEY)}.")
    return missing, copied, total


def restore_backup(
    path: Path,
    *,
    force: bool = False,
    passphrase: str | None = None,
    safety_dir: Path | None = None,
    allow_unsigned: bool = False,
    say: Say = quiet,
) -> Restored:
    """Restores `path` into this instance (see the module's docstring)."""
    reader = archive.Reader(path)
    try:
        with tempfile.TemporaryDirectory(prefix="portal-restore-") as scratch:
            checking.checked(reader, Path(scratch), allow_unsigned=allow_unsigned, say=say)
            manifest = reader.manifest
            secrets, notes = _secrets(reader, passphrase)
            safety = _make_room(force, safety_dir, say)
            added = _restore_files(reader, say)
            try:
                say("Restoring the database (one transaction)…")
                restoring.restore(Path(scratch) / archive.DATABASE)
            except BaseException:
                for name in added:
                    default_storage.delete(name)
                raise
        say("Running this portal's migrations…")
        call_command("migrate", interactive=False, verbosity=0)
        if secrets is not None:
            notes.extend(_write_secrets(secrets))
        found, checked = _verify(reader, manifest, say)
        return Restored(manifest, found, len(reader.files()), checked, secrets is not None, safety, notes)
    finally:
        reader.close()


def _secrets(reader: archive.Reader, passphrase: str | None) -> tuple[dict[str, Any] | None, list[str]]:
    if archive.SECRETS in reader.members:
        if passphrase:
            return archive.unseal(reader.read(archive.SECRETS), passphrase), []
        return None, [
            "The archive holds the secret key and source keys; without a passphrase they were not "
            "restored, so sources' stored credentials will not decrypt unless SECRET_KEY and "
            "PORTAL_SOURCE_KEYS are the old ones."
        ]
    if passphrase:
        raise RestoreRefusedError(
            "The archive holds no secrets (it was made without --with-secrets); leave out the passphrase."
        )
    return None, []


def _make_room(force: bool, safety_dir: Path | None, say: Say) -> Path | None:
    """Refuses a non-empty instance unless `force`; then backs it up first."""
    there = {name: number for name, number in holdings().items() if number}
    if not there:
        return None
    held = ", ".join(f"{number} {name}" for name, number in there.items())
    if not force:
        raise RestoreRefusedError(
            f"This instance is not empty ({held}). Restore into an empty instance, or pass --force: "
            "this instance is then backed up first and replaced."
        )
    target = safety_dir or settings.BACKUP_DIR or Path(settings.VAR_DIR) / "backups"
    say(f"This instance holds {held}: backing it up first…")
    return make_backup(Path(target), say=say).path


def _restore_files(reader: archive.Reader, say: Say) -> list[str]:
    """Puts every archived file into the configured storage under its own name; returns the
    names it added (not those already there with the same content)."""
    added: list[str] = []
    names = reader.files()
    try:
        for number, name in enumerate(names, start=1):
            expected = reader.members[archive.FILES + name]["sha256"]
            if default_storage.exists(name):
                if sha256_of(default_storage, name) == expected:
                    continue
                default_storage.delete(name)
            with reader.open(archive.FILES + name) as stream:
                saved = default_storage.save(name, File(stream, name=name))
            if saved != name:
                default_storage.delete(saved)
                raise ArchiveError(f"The storage kept files/{name} as {saved!r}; nothing was restored.")
            added.append(name)
            if number % 100 == 0 or number == len(names):
                say(f"Files: {number}/{len(names)}.")
    except BaseException:
        for name in added:
            default_storage.delete(name)
        raise
    return added


def _write_secrets(secrets: dict[str, Any]) -> list[str]:
    """The archived secret key and source keys, written where this instance reads them
    (var/secret_key, var/source_keys) when its environment does not set them."""
    notes: list[str] = []
    var_dir = Path(settings.VAR_DIR)
    key = str(secrets.get("secret_key") or "")
    if settings.SECRET_KEY_FROM_ENV:
        if key != settings.SECRET_KEY:
            notes.append("SECRET_KEY is set in the environment and differs from the archive's: set it to the old one.")
    elif key:
        _write_private(var_dir / "secret_key", key)
        notes.append(f"The secret key was written to {var_dir / 'secret_key'}; restart every process.")
    source_keys = [str(value) for value in secrets.get("source_keys") or []]
    if source_keys and source_keys != list(settings.SOURCE_KEYS):
        if os.environ.get("PORTAL_SOURCE_KEYS"):
            notes.append(
                "PORTAL_SOURCE_KEYS is set in the environment and differs from the archive's: set it to the old keys."
            )
        else:
            _write_private(var_dir / "source_keys", ",".join(source_keys))
            notes.append(f"The source keys were written to {var_dir / 'source_keys'}.")
    return notes


def _write_private(path: Path, value: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".new")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(value)
    os.replace(partial, path)


def _verify(reader: archive.Reader, manifest: dict[str, Any], say: Say) -> tuple[dict[str, int], int]:
    """Compares the restored counts with the manifest's and reads back a sample of files."""
    found = counts()
    expected = manifest.get("counts") or {}
    wrong = [
        f"{name}: {found[name]} instead of {expected.get(name)}"
        for name in COUNTED
        if found[name] != expected.get(name)
    ]
    if wrong:
        raise ArchiveError("The restored database does not match the manifest: " + "; ".join(wrong))
    names = reader.files()
    sample = random.sample(names, min(VERIFY_SAMPLE, len(names)))
    for name in sample:
        if sha256_of(default_storage, name) != reader.members[archive.FILES + name]["sha256"]:
            raise ArchiveError(f"The restored file {name} differs from the archive's.")
    say(
        "Verified: "
        + ", ".join(f"{found[name]} {name}" for name in COUNTED)
        + f" as in the manifest; {len(sample)} of {len(names)} files read back equal."
    )
    return found, len(sample)
