"""`manage.py up` with no DATABASE_URL / REDIS_URL: embedded PostgreSQL and Redis, web,
worker and beat come up, and nothing is left behind after SIGTERM or a kill -9 + restart."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.stack import ROOT, free_port, wait_for

pytestmark = pytest.mark.stack


def _env(var_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        PORTAL_VAR_DIR=str(var_dir),
        PORTAL_ENV_FILE=os.devnull,
        PYTHONUNBUFFERED="1",
        PORTAL_ADMIN_PASSWORD="first admin password",
    )
    return env


def _start(var_dir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "manage.py", "up", "--port", str(port)],
            cwd=ROOT,
            env=_env(var_dir),
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _health(port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return json.loads(response.read())
    except OSError:
        return None


def _wait_healthy(port: int, proc: subprocess.Popen[bytes], log: Path) -> dict:
    wait_for(lambda: proc.poll() is not None or (_health(port) or {}).get("ok"), 180, "healthy /healthz", log)
    assert proc.poll() is None, log.read_text()
    body = _health(port)
    assert body is not None
    return body


def _processes_of(var_dir: Path) -> list[psutil.Process]:
    """Every process started for this var dir: by its environment or its command line."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid == os.getpid() or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("PORTAL_VAR_DIR") == str(var_dir) or str(var_dir) in " ".join(proc.cmdline()):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _postmaster_pid(var_dir: Path) -> int:
    return int((var_dir / "pg" / "postmaster.pid").read_text().splitlines()[0])


def test_it_comes_up_embedded_comes_back_after_a_kill_9_and_stops_cleanly(tmp_path):
    """One life of a portal: up on an empty var folder, killed with kill -9, up again on the
    embedded server it left behind, then stopped with SIGTERM, leaving nothing running (one
    test, so that the suite pays for the first start, initdb and migrations included, once)."""
    var_dir, port, log = tmp_path / "var", free_port(), tmp_path / "up.log"
    first = _start(var_dir, port, log)
    second = None
    try:
        body = _wait_healthy(port, first, log)
        assert body["database"]["ok"]
        assert "pgvector" in body["database"]["detail"]
        assert body["redis"]["ok"]
        assert body["worker"]["ok"]
        output = log.read_text()
        assert "admin@localhost" in output
        assert "/accounts/login/" in output
        assert len(_processes_of(var_dir)) >= 5  # up, postgres, redis, daphne, worker, beat
        postmaster = _postmaster_pid(var_dir)
        first.kill()
        first.wait()
        second = _start(var_dir, port, log)
        body = _wait_healthy(port, second, log)
        assert body["ok"] is True
        assert _postmaster_pid(var_dir) == postmaster  # the embedded server left behind was reused
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=60) == 0, log.read_text()[-3000:]
        wait_for(lambda: not _processes_of(var_dir), 20, "every process to stop", log)
        assert not (var_dir / "run" / "services.env").exists()
    finally:
        _kill_all(first, var_dir)
        if second is not None:
            _kill_all(second, var_dir)


def test_it_says_clearly_when_the_port_is_taken(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "manage.py", "up", "--port", str(port)],
            cwd=ROOT,
            env=_env(tmp_path / "var"),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert f"Port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "--port" in result.stderr
    assert not _processes_of(tmp_path / "var")


def _kill_all(proc: subprocess.Popen[bytes], var_dir: Path) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for leftover in _processes_of(var_dir):
        leftover.kill()
