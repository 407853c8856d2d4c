"""`manage.py up`: the whole portal on one machine, in one console."""

from __future__ import annotations

import signal
import socket
import sys
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from common.metrics import clear_folder
from portal.services import ServiceError, Services
from portal.supervisor import (
    EVALUATION_QUEUE,
    MEMORY_QUEUE,
    QUICK_QUEUE,
    Supervisor,
    beat_command,
    wait_for_http,
    web_command,
    worker_command,
)


class Interrupted(BaseException):
    """Raised from the signal handler so that any blocking step unwinds into cleanup."""


class Command(BaseCommand):
    help = (
        "Start the portal: the embedded PostgreSQL and Redis unless DATABASE_URL / REDIS_URL are set, "
        "migrations, the first admin account, then web (daphne), a Celery worker, a memory worker and Celery beat. "
        "Ctrl-C or SIGTERM stops everything it started."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=settings.HOST, help="Address to serve on (PORTAL_HOST).")
        parser.add_argument("--port", type=int, default=settings.PORT, help="Port to serve on (PORTAL_PORT).")

    def handle(self, *args: Any, host: str, port: int, **options: Any) -> None:
        services = Services(settings.VAR_DIR)
        supervisor = Supervisor(settings.VAR_DIR, env={}, out=self._print)
        stopping = threading.Event()

        def on_signal(signum: int, frame: Any) -> None:
            if not stopping.is_set():
                stopping.set()
                raise Interrupted

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self._run(services, supervisor, host, port, stopping)
        except ServiceError as exc:
            raise CommandError(str(exc)) from None
        except Interrupted:
            self._print("Stopping…")
        finally:
            # A second Ctrl-C must not cut the cleanup short.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            supervisor.stop()
            services.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        self._print("Stopped.")
        if not stopping.is_set():
            raise CommandError("A portal process stopped unexpectedly; see its output above.")

    def _run(self, services: Services, supervisor: Supervisor, host: str, port: int, stopping: threading.Event) -> None:
        leftovers = supervisor.claim()
        if leftovers:
            self._print(f"Stopped {leftovers} process(es) left behind by an earlier run.")
        supervisor.check_port_free(host, port)
        clear_folder(settings.METRICS_DIR)  # the counts of the processes started below (/metrics)
        supervisor.env = services.start(say=self._print)
        python, manage = sys.executable, str(settings.BASE_DIR / "manage.py")
        url = f"http://{_url_host(host)}:{port}/"
        supervisor.run_once("setup", [python, manage, "prepare", "--url", url])
        supervisor.start("web", web_command(host, port, settings.REQUEST_TIMEOUT))
        supervisor.start("worker", worker_command(f"portal@{socket.gethostname()}", settings.WORKER_CONCURRENCY))
        if settings.QUICK_INGEST_BYTES:  # small uploads, searchable while a long document is read
            supervisor.start("quick", worker_command(f"quick@{socket.gethostname()}", 1, QUICK_QUEUE))
        # Work that waits for answers, in one process (it loads the chat model once): memory
        # extraction and evaluations of index versions.
        background = f"{MEMORY_QUEUE},{EVALUATION_QUEUE}" if settings.MEMORY_ENABLED else EVALUATION_QUEUE
        supervisor.start("background", worker_command(f"background@{socket.gethostname()}", 1, background))
        supervisor.start("beat", beat_command(settings.VAR_DIR / "run" / "celerybeat-schedule"))
        if wait_for_http(url + "healthz", timeout=60, stop=stopping):
            supervisor.say(self.style.SUCCESS(f"The portal is up at {url}  (Ctrl-C stops it)"))
        elif not stopping.is_set():
            supervisor.say(self.style.WARNING(f"{url} does not answer after 60 s; see the web output above."))
        while supervisor.exited() is None:
            stopping.wait(0.5)
        child = supervisor.exited()
        assert child is not None
        supervisor.say(self.style.ERROR(f"{child.name} exited with code {child.proc.returncode}; stopping the rest."))

    def _print(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", "::", ""):  # noqa: S104 (recognising it, not binding)
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host
