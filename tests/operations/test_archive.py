"""The backup archive on its own, no database: members checked against the manifest, names
that escape the archive and sparse members refused, sizes bounded, secrets sealed with a
passphrase, manifests signed."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from operations import archive
from operations.archive import ArchiveError
from tests.operations.hostile import sparse_archive

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


@pytest.mark.parametrize("tar_format", ["gnu", "posix"])
def test_a_sparse_member_is_refused_before_anything_is_read(tmp_path, tar_format):
    """GNU tar stores a sparse file as its data blocks and a map: 50 MB of zeros in a few
    kilobytes, which would be written out whole."""
    path = sparse_archive(tmp_path, 50 << 20, tar_format)
    reader = archive.Reader(path)
    with pytest.raises(ArchiveError, match=r"zeros\.pdf is a sparse file"):
        reader.check_sizes(None)
    with pytest.raises(ArchiveError, match=r"zeros\.pdf is a sparse file"):
        reader.verify()
    with pytest.raises(ArchiveError, match=r"zeros\.pdf is a sparse file"):
        reader.open(archive.FILES + "collections/1/originals/zeros.pdf")
    reader.close()


def test_the_members_are_bounded_one_by_one_and_together(tmp_path):
    path = _small_archive(tmp_path / "a.tar")
    reader = archive.Reader(path)
    assert reader.check_sizes(None) == 1700 + 850
    assert reader.check_sizes(2550) == 2550
    with pytest.raises(ArchiveError, match=r"database\.dump has 1700 bytes, more than the 1000 a restore may write"):
        reader.check_sizes(1000)
    with pytest.raises(ArchiveError, match="add up to 2550 bytes, more than the 2000"):
        reader.check_sizes(2000)
    reader.close()


def test_a_signature_names_its_key_and_holds_only_for_the_manifest_it_signed(tmp_path):
    key, other = "k" * 32, "o" * 32
    writer = archive.Writer(tmp_path / "signed.tar", signing_key=key)
    writer.add_bytes(archive.DATABASE, b"not really a dump")
    path = writer.close({"counts": {}, "files": {"count": 0}})
    reader = archive.Reader(path)
    assert reader.verify(key) == archive.Signature(
        signed=True, key=archive.key_id(key), matches=True, own_key=archive.key_id(key)
    )
    assert (
        reader.verify().describe()
        == f"signed with the key {archive.key_id(key)}, not checked (no PORTAL_BACKUP_SIGNING_KEY here)"
    )
    wrong = reader.signature(other)
    assert wrong.matches is False
    assert (
        wrong.describe() == f"signed with another key ({archive.key_id(key)}; this portal's is {archive.key_id(other)})"
    )
    assert key.encode() not in path.read_bytes()
    reader.close()

    # The manifest changed after signing (a member swapped, its checksum made to match).
    data = path.read_bytes().replace(b'"counts": {}', b'"counts":{} ')
    changed = tmp_path / "changed.tar"
    changed.write_bytes(data)
    assert archive.Reader(changed).signature(key).describe().endswith("but the manifest was changed after signing")

    unsigned = archive.Reader(_small_archive(tmp_path / "unsigned.tar"))
    assert unsigned.verify(key) == archive.Signature(signed=False, own_key=archive.key_id(key))
    assert unsigned.verify(key).describe() == "not signed"
