"""Real daphne and Celery worker processes for tests, on the test database and Redis."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from django.conf import settings
from psycopg.conninfo import make_conninfo

from portal.services import die_with_parent, stop_process_group
from portal.supervisor import EVALUATION_QUEUE, MEMORY_QUEUE, WORK_QUEUES, web_command, worker_command

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_database_url() -> str:
    """The URL of the database pytest-django created (test_<name>), for child processes."""
    return database_url(str(settings.DATABASES["default"]["NAME"]))


def database_url(name: str) -> str:
    """The DATABASE_URL (all a portal reads) of the database `name` on the test server. A
    socket folder, the embedded server's HOST, goes in `?host=`: a URL's host cannot hold it."""
    db: dict[str, Any] = settings.DATABASES["default"]
    user = quote(str(db["USER"] or ""))
    password = f":{quote(str(db['PASSWORD']))}" if db["PASSWORD"] else ""
    auth = f"{user}{password}@" if user else ""
    host = str(db["HOST"] or "")
    database = quote(name, safe="")
    options = {str(key): str(value) for key, value in db["OPTIONS"].items()}
    if host.startswith("/"):
        options["host"], netloc = host, auth
    else:
        port = f":{db['PORT']}" if db["PORT"] else ""
        netloc = f"{auth}[{host}]{port}" if ":" in host else f"{auth}{host}{port}"
    query = f"?{urlencode(options, quote_via=quote)}" if options else ""
    return f"postgresql://{netloc}/{database}{query}"


def server_conninfo(dbname: str) -> str:
    """libpq keywords for a database on the test server. Never a URL formatted from the
    settings: with the embedded server HOST is a socket folder, which a URL's host part cannot
    hold (libpq took `/…/pg:/postgres` for a database name, on the default socket)."""
    database: dict[str, Any] = settings.DATABASES["default"]
    return make_conninfo(
        host=database["HOST"] or None,
        port=database["PORT"] or None,
        user=database["USER"] or None,
        password=database["PASSWORD"] or None,
        dbname=dbname,
        **database["OPTIONS"],
    )


def child_env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "PORTAL_VAR_DIR": str(settings.VAR_DIR),
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),  # the test's own, so children see its files
        "PYTHONUNBUFFERED": "1",
        # No connection outlives a request, so the test database can be dropped at the end.
        "DB_CONN_MAX_AGE": "0",
        **extra,
    }


@contextmanager
def process(args: list[str], log: Path, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            args, cwd=ROOT, env=child_env(**env), stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
        )
    try:
        yield proc
    finally:
        import psutil

        with suppress(psutil.NoSuchProcess):
            stop_process_group(psutil.Process(proc.pid))
        proc.wait()


def wait_for(check: Callable[..., Any], timeout: float, what: str, log: Path | None = None, every: float = 0.2) -> Any:
    """The first truthy value `check()` returns, asked every `every` seconds: the suite's one
    way to wait for something another process does. Fails saying `what` did not happen (and
    the tail of `log`, a server's or worker's output) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    raise AssertionError(f"{what} did not happen within {timeout:.0f} s\n{tail}")


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):  # noqa: S310 (our own http:// URL)
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def daphne(log: Path, port: int):
    return process(web_command("127.0.0.1", port), log)


@contextmanager
def evidence_web(log: Path) -> Iterator[int]:
    """daphne answering from the evidence alone (no chat model needed for an answer), up and
    serving /healthz; yields its port."""
    port = free_port()
    with process(web_command("127.0.0.1", port), log, PORTAL_ANSWER_MODE="evidence") as proc:
        wait_for(lambda: http_ok(f"http://127.0.0.1:{port}/healthz") or proc.poll() is not None, 60, "daphne", log)
        assert proc.poll() is None, log.read_text()
        yield port


def celery_worker(log: Path):
    """One worker for every queue, as a small deployment may run it: ingestion, memory and
    evaluation."""
    queues = f"{WORK_QUEUES},{MEMORY_QUEUE},{EVALUATION_QUEUE}"
    return process(worker_command(f"test-{os.getpid()}@%h", 1, queues), log)
