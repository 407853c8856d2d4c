"""Archives an attacker would make: a dump written by pg_dump from a database of their own,
or a portal's dump with some of its SQL rewritten, put into a portal's archive in place of
its own, with the manifest's checksums made to match (they prove nothing)."""

from __future__ import annotations

import json
import subprocess
import tarfile
import uuid
from pathlib import Path

import psycopg
from django.db import connection

from operations import archive, postgres
from tests.stack import server_conninfo

# Where the dumps' programs would write: /tmp, which the database server's account (postgres,
# or the embedded server's pgserver) may write to.
PWNED_DIR = Path("/tmp")

# A function that runs a program on the database server, called by a CHECK constraint for
# every row the restore copies in. The table gets its row while the function is harmless;
# then the function is replaced (existing rows are not checked again).
PROGRAM_FROM_A_CONSTRAINT = """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE FUNCTION public.audit_row(value text) RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN RETURN true; END $$;
CREATE TABLE public.knowledge_audit (id integer, CONSTRAINT audited CHECK (public.audit_row(id::text)));
INSERT INTO public.knowledge_audit VALUES (1);
CREATE OR REPLACE FUNCTION public.audit_row(value text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN EXECUTE 'COPY (SELECT 1) TO PROGRAM ''id > {target}'''; RETURN true; END $$;
"""


def pwned_path() -> Path:
    return PWNED_DIR / f"portal-pwned-{uuid.uuid4().hex[:10]}"


def dump_of(database_url: str, statements: str, out: Path) -> Path:
    """`statements` run in the (scratch) database, then the whole of it dumped by pg_dump. Its
    output goes through a pipe, as `pg_dump | ssh …` would send it: the dump then records no
    positions of its data, so that `rewrite` may change the length of its SQL."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        if statements:
            conn.execute(statements.encode())
        client = postgres.client_for(int(conn.info.server_version // 10000))
    with out.open("wb") as handle:
        process = subprocess.Popen(
            [client.program("pg_dump"), "--format=custom", f"--dbname={database_url}"],
            env=client.environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        stdout, stderr = process.communicate()
        handle.write(stdout)
    assert process.returncode == 0, stderr.decode()
    return out


def this_database() -> str:
    """libpq's keywords for the test database (its HOST may be a socket folder)."""
    return server_conninfo(str(connection.settings_dict["NAME"]))


def _string(data: bytes) -> bytes:
    """A string as the custom format stores it: a sign byte and a 4-byte length, then the
    bytes (pg_dump writes "Integer: 4 bytes" into every header)."""
    return b"\x00" + len(data).to_bytes(4, "little") + data


def rewrite(dump: bytes, old: bytes, new: bytes) -> bytes:
    """The one TOC string `old` of a custom-format dump (an entry's kind or its SQL) replaced
    by `new`: the kind is a label pg_restore prints, and the SQL is written out as it is."""
    assert dump.count(_string(old)) == 1, f"{old[:60]!r} is not one string of the dump"
    return dump.replace(_string(old), _string(new))


def entry_sql(dump: bytes, starts_with: bytes) -> bytes:
    """The whole SQL string of the TOC entry that starts with `starts_with`."""
    at = dump.index(starts_with)
    length = int.from_bytes(dump[at - 4 : at], "little")
    return dump[at : at + length]


def with_dump(original: Path, dump: bytes, out: Path) -> Path:
    """`original`'s members and manifest around another database dump, its SHA-256 in the
    manifest: what anyone can write."""
    reader = archive.Reader(original)
    writer = archive.Writer(out)
    for name in sorted(reader.members):
        if name == archive.DATABASE:
            writer.add_bytes(name, dump)
        else:
            writer.add_bytes(name, reader.read(name))
    manifest = {key: value for key, value in reader.manifest.items() if key not in ("members", "format")}
    reader.close()
    return writer.close(manifest)


def sparse_archive(folder: Path, size: int, tar_format: str) -> Path:
    """An archive whose one stored file is a sparse file of `size` zero bytes, written by GNU
    tar (`--sparse`; "gnu": GNU sparse headers, "posix": PAX ones), with a manifest that
    matches it: a few kilobytes that stand for `size` bytes on disk."""
    import hashlib

    staging = folder / "staging"
    (staging / "files/collections/1/originals").mkdir(parents=True)
    name = "files/collections/1/originals/zeros.pdf"
    with (staging / name).open("wb") as handle:
        handle.truncate(size)
    digest = hashlib.sha256()
    block = bytes(1 << 20)
    for _ in range(size >> 20):
        digest.update(block)
    digest.update(bytes(size % (1 << 20)))
    dump = b"PGDMP not a real dump"
    (staging / archive.DATABASE).write_bytes(dump)
    members = {
        archive.DATABASE: {"size": len(dump), "sha256": hashlib.sha256(dump).hexdigest()},
        name: {"size": size, "sha256": digest.hexdigest()},
    }
    manifest = {"format": archive.FORMAT, "members": members, "counts": {}, "files": {"count": 1}}
    (staging / archive.MANIFEST).write_text(json.dumps(manifest))
    path = folder / f"sparse-{tar_format}.tar"
    subprocess.run(
        ["tar", "--sparse", f"--format={tar_format}", "-cf", str(path), "-C", str(staging), archive.DATABASE, name],
        check=True,
    )
    subprocess.run(
        ["tar", f"--format={tar_format}", "-rf", str(path), "-C", str(staging), archive.MANIFEST], check=True
    )
    with tarfile.open(path) as tar:
        assert tar.getmember(name).issparse(), "GNU tar wrote the file whole"
    assert path.stat().st_size < size // 100
    return path
