"""The audited writes of operations: a backup made (by a person or by beat, with the old
scheduled ones it pruned) and a backup restored. Each leaves one audit entry."""

from __future__ import annotations

from pathlib import Path

from django.db import transaction

from audit.log import record
from audit.models import Action
from operations.backup import Made, Restored, Say, make_backup, quiet, restore_backup

# The archives a scheduled backup names (make_backup's names); pruning touches nothing else.
ARCHIVE_GLOB = "portal-backup-*.tar"


def do_backup(out_dir: Path, *, passphrase: str | None = None, keep: int = 0, say: Say = quiet) -> Made:
    """A backup into `out_dir`; with `keep`, only the newest `keep` archives there stay."""
    made = make_backup(out_dir, passphrase=passphrase, say=say)
    pruned = prune(out_dir, keep) if keep else []
    for path in pruned:
        say(f"Deleted the old backup {path.name}.")
    files = made.manifest["files"]
    with transaction.atomic():
        record(
            Action.BACKUP_CREATE,
            object_type="backup",
            object_id=made.path.name,
            label=str(made.path),
            changes={
                "documents": (None, made.manifest["counts"]["documents"]),
                "files": (None, files["count"]),
                "bytes": (None, made.path.stat().st_size),
                "secrets": (None, made.manifest["secrets"]),
                **({"pruned": ([path.name for path in pruned], None)} if pruned else {}),
            },
        )
    return made


def prune(out_dir: Path, keep: int) -> list[Path]:
    """Deletes all but the newest `keep` archives in `out_dir`; returns those deleted."""
    archives = sorted(out_dir.glob(ARCHIVE_GLOB), key=lambda path: (path.stat().st_mtime, path.name))
    old = archives[: max(len(archives) - keep, 0)]
    for path in old:
        path.unlink(missing_ok=True)
    return old


def do_restore(
    path: Path,
    *,
    force: bool = False,
    passphrase: str | None = None,
    safety_dir: Path | None = None,
    allow_unsigned: bool = False,
    say: Say = quiet,
) -> Restored:
    """Restores `path`; the entry is written into the restored audit log."""
    restored = restore_backup(
        path, force=force, passphrase=passphrase, safety_dir=safety_dir, allow_unsigned=allow_unsigned, say=say
    )
    with transaction.atomic():
        record(
            Action.BACKUP_RESTORE,
            object_type="backup",
            object_id=path.name,
            label=str(path),
            changes={
                "documents": (None, restored.counts["documents"]),
                "files": (None, restored.files),
                "made": (None, restored.manifest.get("created")),
                "secrets": (None, restored.secrets),
                **({"safety_backup": (None, str(restored.safety_backup))} if restored.safety_backup else {}),
            },
        )
    return restored
