"""The backup archive on its own, no database: members checked against the manifest, names
that escape the archive refused, secrets sealed with a passphrase."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from operations import archive
from operations.archive import ArchiveError

PASSPHRASE = "correct horse battery staple"


def _small_archive(path: Path) -> Path:
    writer = archive.Writer(path)
    writer.add_bytes(archive.DATABASE, b"not really a dump" * 100)
    writer.add_bytes(archive.FILES + "collections/1/originals/ab/abc", b"%PDF-1.7 original" * 50)
    return writer.close({"counts": {}, "files": {"count": 1}})


def test_an_archive_is_checked_member_by_member(tmp_path):
    path = _small_archive(tmp_path / "a.tar")
    assert not (tmp_path / "a.tar.part").exists()
    reader = archive.Reader(path)
    reader.verify()
    assert reader.files() == ["collections/1/originals/ab/abc"]
    reader.close()

    # One byte of a stored file changed: that member is named.
    data = bytearray(path.read_bytes())
    at = data.index(b"%PDF-1.7 original") + 5
    data[at] ^= 0xFF
    damaged = tmp_path / "damaged.tar"
    damaged.write_bytes(bytes(data))
    with pytest.raises(ArchiveError, match="files/collections/1/originals/ab/abc does not match its SHA-256"):
        archive.Reader(damaged).verify()

    # Cut short: the manifest (written last) is gone, and the reader says so.
    truncated = tmp_path / "truncated.tar"
    truncated.write_bytes(path.read_bytes()[: len(data) // 3])
    with pytest.raises(ArchiveError, match=r"manifest\.json is missing|not a readable backup archive"):
        archive.Reader(truncated)


def test_a_manifest_that_names_a_member_outside_the_archive_is_refused(tmp_path):
    path = tmp_path / "evil.tar"
    manifest = json.dumps({"format": archive.FORMAT, "members": {"../../etc/passwd": {"size": 1, "sha256": "0"}}})
    with tarfile.open(path, "w") as tar:
        info = tarfile.TarInfo(archive.MANIFEST)
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest.encode()))
    with pytest.raises(ArchiveError, match="outside itself"):
        archive.Reader(path)


def test_secrets_open_only_with_their_passphrase():
    sealed = archive.seal({"secret_key": "k" * 50, "source_keys": ["one"]}, PASSPHRASE)
    assert b"k" * 50 not in sealed
    assert archive.unseal(sealed, PASSPHRASE) == {"secret_key": "k" * 50, "source_keys": ["one"]}
    with pytest.raises(ArchiveError, match="wrong passphrase"):
        archive.unseal(sealed, PASSPHRASE + "!")
