"""Runs the portal's processes (web, worker, beat) as children of `manage.py up`, with their
output prefixed in one console, and stops all of them together.

A state file under var/run records the children, so that the next `up` after a `kill -9`
finds and stops anything a dead supervisor left behind. No Django imports here.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from portal.services import ServiceError, die_with_parent, stop_process_group

COLOURS = {"web": "\033[36m", "worker": "\033[33m", "beat": "\033[35m", "setup": "\033[32m"}
RESET = "\033[0m"


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    reader: threading.Thread


@dataclass
class Supervisor:
    var_dir: Path
    env: dict[str, str]
    out: Callable[[str], None] = print
    children: list[Child] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def state_file(self) -> Path:
        return self.var_dir / "run" / "up.json"

    # Leftovers and ports

    def claim(self) -> int:
        """Become the one supervisor for this var dir; stop what a killed one left behind.
        Returns how many leftover processes were stopped."""
        previous = self._read_state()
        if previous and _alive(previous.get("supervisor", {})):
            raise ServiceError(
                f"The portal is already running from {self.var_dir} (pid {previous['supervisor']['pid']}). "
                "Stop it first, or set PORTAL_VAR_DIR to run a second one."
            )
        stopped = 0
        for entry in (previous or {}).get("children", []):
            proc = _alive(entry)
            if proc is not None:
                stop_process_group(proc)
                stopped += 1
        self._write_state()
        return stopped

    def _read_state(self) -> dict | None:
        try:
            return json.loads(self.state_file.read_text())
        except (FileNotFoundError, ValueError):
            return None

    def _write_state(self) -> None:
        state = {
            "supervisor": _describe(os.getpid()),
            "children": [_describe(child.proc.pid) for child in self.children],
        }
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(self.state_file)

    @staticmethod
    def check_port_free(host: str, port: int) -> None:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
            # As daphne does: connections in TIME_WAIT from a previous run must not count as "in use".
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as exc:
                raise ServiceError(
                    f"Port {port} on {host} is already in use ({exc.strerror}). Stop the program using it, "
                    f"or choose another port: `manage.py up --port {port + 1}` (or set PORTAL_PORT)."
                ) from None

    # Children

    def run_once(self, name: str, args: list[str]) -> None:
        """Run a setup step (migrate, first admin) to completion, failing loudly."""
        child = self._spawn(name, args)
        code = child.proc.wait()
        child.reader.join()
        self.children.remove(child)
        if code != 0:
            raise ServiceError(f"`{' '.join(args[1:])}` failed with exit code {code}; see its output above.")

    def start(self, name: str, args: list[str]) -> None:
        self._spawn(name, args)
        self._write_state()

    def _spawn(self, name: str, args: list[str]) -> Child:
        proc = subprocess.Popen(
            args,
            env={**os.environ, **self.env, "PYTHONUNBUFFERED": "1"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
        reader = threading.Thread(target=self._pump, args=(name, proc), daemon=True)
        reader.start()
        child = Child(name, proc, reader)
        self.children.append(child)
        return child

    def _pump(self, name: str, proc: subprocess.Popen[bytes]) -> None:
        colour = COLOURS.get(name, "") if sys.stdout.isatty() else ""
        prefix = f"{colour}{name:<6}|{RESET if colour else ''} "
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip()
            with self._lock:
                self.out(prefix + line)

    def say(self, line: str) -> None:
        with self._lock:
            self.out(line)

    def exited(self) -> Child | None:
        """A long-running child that stopped on its own, if any."""
        return next((child for child in self.children if child.proc.poll() is not None), None)

    def stop(self) -> None:
        for child in reversed(self.children):
            with contextlib.suppress(psutil.NoSuchProcess):
                stop_process_group(psutil.Process(child.proc.pid))
            child.proc.wait()
            child.reader.join(timeout=2)
        self.children.clear()
        self.state_file.unlink(missing_ok=True)


# The portal's long-running processes: `up` and the tests start exactly these commands.


def web_command(host: str, port: int, request_timeout: int | None = None) -> list[str]:
    """daphne; with `request_timeout`, a request whose view has not answered in that many
    seconds gets a 503 (PORTAL_REQUEST_TIMEOUT)."""
    timeout = ["-t", str(request_timeout)] if request_timeout else []
    return [sys.executable, "-m", "daphne", "-b", host, "-p", str(port), *timeout, "portal.asgi:application"]


# Queues of the portal's workers (portal/celery.py routes the tasks): documents, small
# documents (taken by any free worker, and by one of their own so that they never wait behind
# a long document) and the rest; memory extraction on a worker of its own, so that an upload
# never waits behind it.
WORK_QUEUES = "ingest,quick,default"
QUICK_QUEUE = "quick"
MEMORY_QUEUE = "memory"
EVALUATION_QUEUE = "evaluation"


def worker_command(name: str, concurrency: int, queues: str = WORK_QUEUES) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "portal", "worker", "-Q", queues,
            "--loglevel", "INFO", "-c", str(concurrency), "-n", name]  # fmt: skip


def beat_command(schedule: Path) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "portal", "beat", "--loglevel", "INFO", "-s", str(schedule)]


def wait_for_http(url: str, timeout: float, stop: threading.Event) -> bool:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not stop.is_set():
        try:
            with urllib.request.urlopen(url, timeout=2):  # noqa: S310 (our own http:// URL)
                return True
        except urllib.error.HTTPError:
            return True  # it answers: that is all we wait for
        except OSError:
            time.sleep(0.3)
    return False


def _describe(pid: int) -> dict[str, float | int]:
    return {"pid": pid, "created": psutil.Process(pid).create_time()}


def _alive(entry: dict) -> psutil.Process | None:
    """The process in a state entry if it still runs (same pid and start time: not a reuse)."""
    try:
        proc = psutil.Process(int(entry["pid"]))
        if abs(proc.create_time() - float(entry["created"])) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE:
            return proc
    except (KeyError, ValueError, TypeError, psutil.NoSuchProcess, psutil.AccessDenied):
        pass
    return None
