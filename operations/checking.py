"""What a restore checks before it changes anything, cheapest first: the archive's signature,
the sizes of its members (sparse ones refused) against PORTAL_RESTORE_MAX_MB and the free
disk space, every member's SHA-256, the migrations it was made with, and the dump's table of
contents (operations/restoring.py). `manage.py restore --check` runs these alone."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.storage import default_storage
from django.db.migrations.loader import MigrationLoader

from common.storage import CHUNK, is_object_store
from operations import archive, postgres, restoring
from operations.archive import Signature

Say = Callable[[str], None]
# What a restore leaves free on each disk it writes the archive's members to.
FREE_SPACE_KEPT = 1 << 30


def quiet(message: str) -> None:
    pass


class RestoreRefusedError(Exception):
    """The instance is not one this archive may be restored into; nothing was changed."""


@dataclass
class Checked:
    """An archive read through without a change to this instance."""

    manifest: dict[str, Any]
    signature: Signature
    size: int


def check_backup(path: Path, *, allow_unsigned: bool = False, say: Say = quiet) -> Checked:
    """Everything a restore checks before it changes anything, and nothing more."""
    reader = archive.Reader(path)
    try:
        with tempfile.TemporaryDirectory(prefix="portal-restore-") as scratch:
            signature, size = checked(reader, Path(scratch), allow_unsigned=allow_unsigned, say=say)
        return Checked(reader.manifest, signature, size)
    finally:
        reader.close()


def checked(reader: archive.Reader, scratch: Path, *, allow_unsigned: bool, say: Say) -> tuple[Signature, int]:
    """The archive's signature, sizes, checksums, schema and dump (copied into `scratch`)
    checked in that order, the cheapest first; returns the signature and the bytes the
    members add up to."""
    manifest = reader.manifest
    portal = manifest.get("portal") or {}
    say(
        f"Archive of {manifest.get('created', '?')} by portal {portal.get('version', '?')} "
        f"{(portal.get('commit') or '')[:12]}: {(manifest.get('counts') or {}).get('documents', 0)} documents, "
        f"{(manifest.get('files') or {}).get('count', 0)} files."
    )
    signature = reader.signature(settings.BACKUP_SIGNING_KEY)
    say(f"Signature: {signature.describe()}.")
    _check_signature(signature, allow_unsigned)
    size = reader.check_sizes(settings.RESTORE_MAX_MB << 20 if settings.RESTORE_MAX_MB else None)
    _check_space(reader)
    say("Checking every member's SHA-256…")
    reader.verify()
    _check_schema(manifest)
    dump_path = scratch / archive.DATABASE
    with reader.open(archive.DATABASE) as source, dump_path.open("wb") as target_file:
        shutil.copyfileobj(source, target_file, CHUNK)
    client = postgres.client_for(max(postgres.server_major(), postgres.dump_major(dump_path)))
    entries = restoring.check_dump(dump_path, client)
    say(f"Database dump: {len(entries)} entries, all of kinds a portal's database holds.")
    return signature, size


def _check_signature(signature: Signature, allow_unsigned: bool) -> None:
    if signature.matches is False:
        raise RestoreRefusedError(
            f"The archive is {signature.describe()}: it was not made by a portal holding PORTAL_BACKUP_SIGNING_KEY, "
            "or was changed since. Restore an archive signed with this key (or set the key that signed it)."
        )
    if settings.BACKUP_SIGNING_KEY and not signature.signed and not allow_unsigned:
        raise RestoreRefusedError(
            "The archive is not signed, and PORTAL_BACKUP_SIGNING_KEY is set, so where it came from cannot be "
            "checked. Pass --allow-unsigned to restore it all the same (an archive from before the key was set)."
        )


def _check_space(reader: archive.Reader) -> None:
    """Refuses an archive whose members would not fit where a restore writes them (the
    dump in the temporary folder, the files in MEDIA_ROOT unless they go to a bucket),
    leaving FREE_SPACE_KEPT on each disk; the database's own growth is the server's."""
    sizes = reader.sizes()
    files = sum(size for name, size in sizes.items() if name.startswith(archive.FILES))
    places = [(Path(tempfile.gettempdir()), sum(sizes.values()) - files)]
    if not is_object_store(default_storage):
        places.append((Path(settings.MEDIA_ROOT), files))
    disks: dict[int, Path] = {}
    needed: dict[int, int] = {}
    for folder, size in places:
        existing = folder
        while not existing.exists() and existing != existing.parent:  # MEDIA_ROOT may not be made yet
            existing = existing.parent
        device = existing.stat().st_dev
        disks.setdefault(device, existing)
        needed[device] = needed.get(device, 0) + size
    for device, size in needed.items():
        free = shutil.disk_usage(disks[device]).free
        if size + FREE_SPACE_KEPT > free:
            raise RestoreRefusedError(
                f"The archive's members need {_size(size)} in {disks[device]}, which has {_size(free)} free (a restore "
                f"leaves {_size(FREE_SPACE_KEPT)}): free some space there, or set TMPDIR to a larger disk."
            )


def _check_schema(manifest: dict[str, Any]) -> None:
    """Refuses an archive made by a newer portal: this code cannot undo its migrations."""
    known = set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)
    newer = [
        f"{app}.{name}"
        for app, names in (manifest.get("migrations") or {}).items()
        for name in names
        if (app, name) not in known
    ]
    if newer:
        raise RestoreRefusedError(
            f"The archive was made by a newer portal (migrations this code does not have: {', '.join(newer[:5])}). "
            "Upgrade this portal to that version or later, then restore."
        )


def _size(bytes_: int) -> str:
    return f"{bytes_ / (1 << 20):.1f} MB"
