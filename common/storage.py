"""Stored files through Django's storage API, whichever backend holds them: the local file
system (one machine) or an S3-compatible object store (every web and worker process shares
it). The helpers here are what the rest of the portal needs beyond `FieldFile.open()`:

- `local_copy`: parsers and PyMuPDF want a path; on disk that is the stored file itself, in
  an object store a temporary copy, streamed down and deleted after use.
- `read_range` and `open_stream`: byte ranges and whole downloads without reading a whole
  object into memory or onto disk first (a video's Range request asks for a few MB of GBs).
- `sha256_of`: a stored file's hash, streamed, for `move_files`' verification.

A file missing from its storage raises FileNotFoundError in every backend, so that callers
can answer a readable 404 instead of a 500."""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

if TYPE_CHECKING:
    from django.core.files.storage import Storage

CHUNK = 1 << 20  # bytes read at a time when copying or hashing


def s3_options(
    *, endpoint_url: str, bucket: str, region: str, access_key: str, secret_key: str, timeout: int
) -> dict[str, object]:
    """django-storages' S3Storage options for the portal's files (settings.STORAGES), from the
    PORTAL_S3_* settings: path-style addressing (MinIO, Ceph), no ACL and no presigned URLs
    (files are served only through the portal's access-checked routes), short timeouts."""
    from botocore.config import Config

    return {
        "bucket_name": bucket,
        "endpoint_url": endpoint_url or None,
        "region_name": region,
        "access_key": access_key,
        "secret_key": secret_key,
        # Never overwrite: two documents with the same content get two objects, as on disk,
        # so that deleting one leaves the other's original in place.
        "file_overwrite": False,
        "default_acl": None,
        "querystring_auth": False,
        # A file opened whole (S3File) spills to a temporary file past this size.
        "max_memory_size": 8 << 20,
        "client_config": Config(
            s3={"addressing_style": "path"},  # no bucket names in host names
            connect_timeout=timeout,
            read_timeout=timeout * 3,
            retries={"max_attempts": 2, "mode": "standard"},
            signature_version="s3v4",
        ),
    }


def is_object_store(storage: Storage) -> bool:
    """Whether `storage` is django-storages' S3 backend (any S3-compatible store)."""
    try:
        from storages.backends.s3 import S3Storage
    except ImportError:  # pragma: no cover - django-storages is a requirement
        return False
    return isinstance(storage, S3Storage)


def local_path(storage: Storage, name: str) -> Path | None:
    """The file's own path when the storage has one (the local file system), else None."""
    try:
        return Path(storage.path(name))
    except NotImplementedError:  # an object store has no local paths
        return None


@contextmanager
def local_copy(field_file: Any) -> Iterator[Path]:
    """A local path to the stored file for as long as the block runs: the file itself on disk,
    else a temporary copy (streamed in chunks, never read whole), deleted afterwards.

    FileNotFoundError when the storage does not have the file."""
    storage, name = field_file.storage, field_file.name
    path = local_path(storage, name)
    if path is not None:
        if not path.exists():
            raise FileNotFoundError(name)
        yield path
        return
    fd, temp = tempfile.mkstemp(prefix="portal-copy-", dir=getattr(settings, "FILE_UPLOAD_TEMP_DIR", None))
    try:
        with os.fdopen(fd, "wb") as out, open_stream(storage, name) as source:
            while chunk := source.read(CHUNK):
                out.write(chunk)
        yield Path(temp)
    finally:
        Path(temp).unlink(missing_ok=True)


def _key(storage: Any, name: str) -> str:
    from storages.utils import clean_name

    return str(storage._normalize_name(clean_name(name)))


def _not_found(error: Exception) -> bool:
    from botocore.exceptions import ClientError

    if not isinstance(error, ClientError):
        return False
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status == 404 or error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound")


def _get_object(storage: Any, name: str, **extra: Any) -> Any:
    """S3 GetObject of the stored file; FileNotFoundError when the key is not there."""
    from botocore.exceptions import ClientError

    client = storage.connection.meta.client
    try:
        return client.get_object(Bucket=storage.bucket_name, Key=_key(storage, name), **extra)
    except ClientError as exc:
        if _not_found(exc):
            raise FileNotFoundError(name) from None
        raise


class _Body:
    """An S3 object's body as a read-only file object (`read`, `close`, a context manager),
    streamed from the response: FileResponse reads it in blocks."""

    def __init__(self, body: Any) -> None:
        self._body = body

    def read(self, size: int = -1) -> bytes:
        return bytes(self._body.read(None if size < 0 else size))

    def close(self) -> None:
        self._body.close()

    def __enter__(self) -> _Body:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_stream(storage: Storage, name: str) -> Any:
    """The stored file opened for reading from its start, streamed rather than loaded whole
    (django-storages' S3File downloads the whole object on first read). Has `read(n)` and
    `close()`; FileNotFoundError when missing."""
    if is_object_store(storage):
        return _Body(_get_object(storage, name)["Body"])
    return storage.open(name, "rb")


def read_range(storage: Storage, name: str, start: int, end: int) -> bytes:
    """Bytes start..end (inclusive) of the stored file: a ranged GET in an object store, a
    seek and read on disk. FileNotFoundError when missing."""
    if is_object_store(storage):
        body = _get_object(storage, name, Range=f"bytes={start}-{end}")["Body"]
        try:
            return bytes(body.read())
        finally:
            body.close()
    with storage.open(name, "rb") as handle:
        handle.seek(start)
        return bytes(handle.read(end - start + 1))


class Hashing(io.RawIOBase):
    """A readable stream that hashes and counts what passes through it (`inner`, read once,
    front to back); an io class so that storages and tarfile treat it as the file object it
    is. Closing it closes `inner`."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner, self.digest, self.size = inner, hashlib.sha256(), 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        data: bytes = self.inner.read(-1 if size is None else size)
        self.digest.update(data)
        self.size += len(data)
        return data

    def close(self) -> None:
        if not self.closed:
            self.inner.close()
        super().close()


def sha256_of(storage: Storage, name: str) -> str:
    """The stored file's SHA-256, read in chunks; FileNotFoundError when missing."""
    digest = hashlib.sha256()
    with open_stream(storage, name) as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
