"""A backup archive: one uncompressed tar file (the dump is compressed by pg_dump, and stored
files are mostly PDFs and pictures that do not shrink), written as a stream:

    database.dump        pg_dump's custom format
    files/<name>         every stored file the dumped rows name, under its storage name
    secrets.json         only with --with-secrets: the secret key and source keys,
                         encrypted with the operator's passphrase
    manifest.json        last: what the archive holds and the SHA-256 and size of every
                         other member

`Reader.verify()` reads every member once against the manifest before a restore touches
anything; a member that is missing, short or different is named. The manifest is written by
whoever made the archive, so it proves nothing about where the archive came from: with a
signing key (PORTAL_BACKUP_SIGNING_KEY, kept apart from the archives), `manifest.sig` holds an
HMAC-SHA256 of the manifest's bytes, which name every member's SHA-256, so that an archive is
known to come from a portal holding that key. Sparse members are refused (a portal writes
none, and a small one can stand for any size on disk), and `Reader.check_sizes` bounds what a
restore would write before it writes anything."""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import os
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from common.storage import CHUNK, Hashing

FORMAT = 1
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
DATABASE = "database.dump"
SECRETS = "secrets.json"
FILES = "files/"
# Passphrase stretching for the secrets (scrypt; about 0.1 s and 32 MB on one core).
SCRYPT_N, SCRYPT_R, SCRYPT_P = 1 << 15, 8, 1


class ArchiveError(Exception):
    """The archive cannot be used; the message names the member and what is wrong."""


def key_id(key: str) -> str:
    """A signing key's fingerprint, which names it without giving it away."""
    return hmac.new(key.encode(), b"portal backup signing key", hashlib.sha256).hexdigest()[:16]


def _mac(key: str, manifest: bytes) -> str:
    return hmac.new(key.encode(), manifest, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Signature:
    """What an archive's signature says of where it came from, against the key given."""

    signed: bool
    key: str = ""  # the fingerprint of the key that signed it
    matches: bool | None = None  # None: no key to check it with, or not signed
    own_key: str = ""  # the fingerprint of the key it was checked with

    def describe(self) -> str:
        if not self.signed:
            return "not signed"
        if self.matches is None:
            return f"signed with the key {self.key}, not checked (no PORTAL_BACKUP_SIGNING_KEY here)"
        if self.matches:
            return f"signed with this portal's key ({self.key})"
        if self.key == self.own_key:
            return f"signed with this portal's key ({self.key}), but the manifest was changed after signing"
        return f"signed with another key ({self.key}; this portal's is {self.own_key})"


@dataclass
class Writer:
    """Writes members one by one into `path` + ".part"; `close()` adds the manifest and
    renames the file, so that an archive under its final name is always complete."""

    path: Path
    signing_key: str = ""
    members: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.partial = self.path.with_name(self.path.name + ".part")
        self.tar = tarfile.open(self.partial, "w", format=tarfile.PAX_FORMAT)  # noqa: SIM115 - closed by close()

    def add(self, name: str, stream: IO[bytes], size: int) -> str:
        """Adds `size` bytes of `stream` as `name`; returns their SHA-256."""
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = size, int(time.time()), 0o600
        hashing = Hashing(stream)
        self.tar.addfile(info, hashing)  # raises when the stream holds fewer bytes
        digest = hashing.digest.hexdigest()
        self.members[name] = {"size": size, "sha256": digest}
        return digest

    def add_bytes(self, name: str, data: bytes) -> str:
        return self.add(name, io.BytesIO(data), len(data))

    def close(self, manifest: dict[str, Any]) -> Path:
        manifest = {**manifest, "format": FORMAT, "members": self.members}
        data = json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=False).encode()
        self._add_last(MANIFEST, data)
        if self.signing_key:
            signature = {
                "algorithm": "HMAC-SHA256",
                "key": key_id(self.signing_key),
                "mac": _mac(self.signing_key, data),
            }
            self._add_last(SIGNATURE, json.dumps(signature).encode())
        self.tar.close()
        os.replace(self.partial, self.path)
        return self.path

    def _add_last(self, name: str, data: bytes) -> None:
        """A member that the manifest does not list (the manifest itself, its signature)."""
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
        self.tar.addfile(info, io.BytesIO(data))

    def abandon(self) -> None:
        self.tar.close()
        self.partial.unlink(missing_ok=True)


class Reader:
    """An archive opened for checking and restoring."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.tar = tarfile.open(path, "r:")  # noqa: SIM115 - closed by close()
            self._by_name = {member.name: member for member in self.tar.getmembers()}
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise ArchiveError(f"{path.name} is not a readable backup archive: {exc}") from exc
        raw = self._read_whole(MANIFEST, limit=256 << 20)
        self._manifest_bytes = raw
        try:
            self.manifest: dict[str, Any] = json.loads(raw)
        except ValueError as exc:
            raise ArchiveError(f"{MANIFEST} in {path.name} is not valid JSON: {exc}") from exc
        if self.manifest.get("format") != FORMAT:
            raise ArchiveError(
                f"{path.name} has archive format {self.manifest.get('format')!r}; this portal reads format {FORMAT}."
            )
        for name in self.members:
            _check_name(name)

    @property
    def members(self) -> dict[str, dict[str, Any]]:
        members: dict[str, dict[str, Any]] = self.manifest.get("members") or {}
        return members

    def files(self) -> list[str]:
        """The storage names of the stored files the archive holds."""
        return sorted(name[len(FILES) :] for name in self.members if name.startswith(FILES))

    def _member(self, name: str) -> tarfile.TarInfo:
        member = self._by_name.get(name)
        if member is None or not member.isfile():
            raise ArchiveError(f"The member {name} is missing from {self.path.name} (a truncated or damaged archive).")
        if member.issparse():
            raise ArchiveError(
                f"The member {name} is a sparse file ({member.size} bytes from far fewer): a portal's backup writes "
                "none, so the archive was not made by one."
            )
        return member

    def sizes(self) -> dict[str, int]:
        """What a restore would write of each member the manifest lists, as its tar header
        says (not as the manifest does), read before anything else; sparse ones refused."""
        return {name: self._member(name).size for name in sorted(self.members)}

    def check_sizes(self, limit: int | None) -> int:
        """The bytes a restore would write out of the archive; ArchiveError, before anything
        is read, for a sparse member or, with `limit`, a member or a total over it."""
        total = 0
        for name, size in self.sizes().items():
            if limit is not None and size > limit:
                raise ArchiveError(f"The member {name} has {size} bytes, more than the {limit} a restore may write.")
            total += size
        if limit is not None and total > limit:
            raise ArchiveError(
                f"The archive's members add up to {total} bytes, more than the {limit} a restore may write."
            )
        return total

    def signature(self, key: str) -> Signature:
        """The archive's signature checked with `key` (none: only read)."""
        if SIGNATURE not in self._by_name:
            return Signature(signed=False, own_key=key_id(key) if key else "")
        try:
            found = json.loads(self._read_whole(SIGNATURE, limit=4096))
            signer, mac = str(found["key"]), str(found["mac"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ArchiveError(f"{SIGNATURE} in {self.path.name} is damaged: {exc}") from exc
        if not key:
            return Signature(signed=True, key=signer)
        matches = hmac.compare_digest(mac, _mac(key, self._manifest_bytes))
        return Signature(signed=True, key=signer, matches=matches, own_key=key_id(key))

    def _read_whole(self, name: str, limit: int) -> bytes:
        member = self._member(name)
        if member.size > limit:
            raise ArchiveError(f"The member {name} is larger than a portal backup writes it.")
        stream = self.tar.extractfile(member)
        assert stream is not None
        try:
            data = stream.read()
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise ArchiveError(f"The member {name} cannot be read: {exc}") from exc
        if len(data) != member.size:
            raise ArchiveError(f"The member {name} is cut short ({len(data)} of {member.size} bytes).")
        return data

    def open(self, name: str) -> IO[bytes]:
        stream = self.tar.extractfile(self._member(name))
        assert stream is not None
        return stream

    def read(self, name: str) -> bytes:
        return self._read_whole(name, limit=1 << 40)

    def verify(self, key: str = "") -> Signature:
        """Reads every member the manifest lists and compares its size and SHA-256; returns
        what the signature says, checked with `key`."""
        for name, expected in sorted(self.members.items()):
            member = self._member(name)
            if member.size != expected["size"]:
                raise ArchiveError(
                    f"The member {name} has {member.size} bytes; the manifest says {expected['size']} (damaged)."
                )
            try:
                with Hashing(self.open(name)) as hashing:
                    while hashing.read(CHUNK):
                        pass
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise ArchiveError(f"The member {name} cannot be read: {exc} (a truncated archive).") from exc
            if hashing.size != expected["size"]:
                raise ArchiveError(f"The member {name} is cut short ({hashing.size} of {expected['size']} bytes).")
            if hashing.digest.hexdigest() != expected["sha256"]:
                raise ArchiveError(f"The member {name} does not match its SHA-256 in the manifest (damaged).")
        return self.signature(key)

    def close(self) -> None:
        self.tar.close()


def _check_name(name: str) -> None:
    """Member names are what this module writes: no absolute paths, no `..`."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise ArchiveError(f"The archive names a member outside itself: {name!r}.")


def _fernet(passphrase: str, salt: bytes, n: int = SCRYPT_N, r: int = SCRYPT_R, p: int = SCRYPT_P) -> Any:
    from cryptography.fernet import Fernet
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

    key = Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(passphrase.encode())
    return Fernet(base64.urlsafe_b64encode(key))


def seal(secrets: dict[str, Any], passphrase: str) -> bytes:
    """The secrets as JSON, encrypted with a key stretched from `passphrase`."""
    salt = os.urandom(16)
    token = _fernet(passphrase, salt).encrypt(json.dumps(secrets).encode())
    box = {"kdf": "scrypt", "n": SCRYPT_N, "r": SCRYPT_R, "p": SCRYPT_P, "salt": base64.b64encode(salt).decode()}
    return json.dumps({**box, "fernet": token.decode()}).encode()


def unseal(data: bytes, passphrase: str) -> dict[str, Any]:
    """The secrets `seal` wrote; ArchiveError for a wrong passphrase."""
    from cryptography.fernet import InvalidToken

    try:
        box = json.loads(data)
        salt = base64.b64decode(box["salt"])
        token = box["fernet"].encode()
        cost = {"n": int(box["n"]), "r": int(box["r"]), "p": int(box["p"])}
    except (ValueError, KeyError, TypeError) as exc:
        raise ArchiveError(f"{SECRETS} is damaged: {exc}") from exc
    try:
        secrets: dict[str, Any] = json.loads(_fernet(passphrase, salt, **cost).decrypt(token))
    except InvalidToken as exc:
        raise ArchiveError("The passphrase does not open the archive's secrets (a wrong passphrase).") from exc
    return secrets
