"""Copy every stored file (originals, page renders, page pictures) from the other backend into
the one PORTAL_STORAGE names: `--to s3` after switching a portal to an object store, `--to
local` to come back. Names stay the same in both, so the rows need no change.

Resumable: a file already at the target with the same size and SHA-256 is skipped, so a run
that was stopped can simply be started again. Each copy is verified by reading it back and
comparing its SHA-256 with the source's. Sources are kept unless `--delete-source`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, default_storage
from django.core.management.base import BaseCommand, CommandError, CommandParser

from common.storage import Hashing, is_object_store, open_stream, sha256_of
from knowledge.models import stored_file_names


@dataclass
class Counts:
    copied: int = 0
    already_there: int = 0
    missing_at_source: int = 0
    deleted_at_source: int = 0
    failed: list[str] = field(default_factory=list)


class Command(BaseCommand):
    help = (
        "Copy every stored file (originals, page renders, page pictures) from the other storage backend "
        "into the configured one (PORTAL_STORAGE), verified by SHA-256; a second run copies only what is missing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--to",
            choices=("s3", "local"),
            required=True,
            help="The backend to fill; it must be the one PORTAL_STORAGE names.",
        )
        parser.add_argument(
            "--delete-source",
            action="store_true",
            help="Delete each file from the other backend once its copy is verified.",
        )

    def handle(self, *args: Any, to: str, delete_source: bool, **options: Any) -> None:
        target: Storage = default_storage
        if is_object_store(target) != (to == "s3"):
            raise CommandError(
                f"PORTAL_STORAGE is {settings.STORAGE_KIND!r}, so files cannot be moved --to {to}: "
                f"set PORTAL_STORAGE={to} (and restart nothing yet), then run this again."
            )
        source = _source(to)
        counts = Counts()
        names = sorted(set(stored_file_names()))
        self.stdout.write(f"{len(names)} stored file(s) to check.")
        for name in names:
            self._move(source, target, name, counts)
            if delete_source and name not in counts.failed:
                self._delete(source, name, counts)
        self.stdout.write(
            f"Copied {counts.copied}, already there {counts.already_there}, "
            f"missing at the source {counts.missing_at_source}, failed {len(counts.failed)}"
            + (f", deleted at the source {counts.deleted_at_source}" if delete_source else "")
            + "."
        )
        if counts.failed:
            raise CommandError(f"{len(counts.failed)} file(s) not moved; run the command again: {counts.failed[:5]}")

    def _move(self, source: Storage, target: Storage, name: str, counts: Counts) -> None:
        try:
            if _same(source, target, name):
                counts.already_there += 1
                return
        except FileNotFoundError:
            if target.exists(name):  # moved by an earlier run that deleted the source
                counts.already_there += 1
            else:  # lost in both: nothing to copy, and running again will not help
                counts.missing_at_source += 1
                self.stderr.write(f"Missing at the source and the target: {name}")
            return
        try:
            if target.exists(name):
                target.delete(name)  # a partial or different copy from an earlier run
            stream = Hashing(open_stream(source, name))
            try:
                saved = target.save(name, File(cast(Any, stream), name=name))
            finally:
                stream.close()
            if saved != name:
                target.delete(saved)
                raise RuntimeError(f"stored as {saved!r}")
            if sha256_of(target, name) != stream.digest.hexdigest():
                target.delete(name)
                raise RuntimeError("the copy's SHA-256 differs from the source's")
        except Exception as exc:  # one file's trouble is reported, the others still move
            counts.failed.append(name)
            self.stderr.write(f"Not copied: {name}: {exc}")
            return
        counts.copied += 1

    def _delete(self, source: Storage, name: str, counts: Counts) -> None:
        if source.exists(name):
            source.delete(name)
            counts.deleted_at_source += 1


def _source(to: str) -> Storage:
    """The backend the files come from: the other one."""
    if to == "s3":
        return FileSystemStorage(location=settings.MEDIA_ROOT)
    if not settings.S3_STORAGE_OPTIONS:
        raise CommandError(
            "To move files out of the object store, keep PORTAL_S3_ENDPOINT_URL, PORTAL_S3_BUCKET, "
            "PORTAL_S3_ACCESS_KEY_ID and PORTAL_S3_SECRET_ACCESS_KEY set while PORTAL_STORAGE=local."
        )
    from storages.backends.s3 import S3Storage

    return S3Storage(**settings.S3_STORAGE_OPTIONS)


def _same(source: Storage, target: Storage, name: str) -> bool:
    """Whether the target already holds the source's file: the same size, then the same
    SHA-256. FileNotFoundError when the source does not have it."""
    size = source.size(name)
    if not target.exists(name) or target.size(name) != size:
        return False
    return sha256_of(source, name) == sha256_of(target, name)
