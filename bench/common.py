"""Helpers the benchmarks share: a real daphne and Celery worker (tests/stack.py's processes,
with production connection reuse), one question over the chat websocket with its timings,
and the median / p95 / max of a series. Import after django.setup()."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings

from portal.supervisor import web_command, worker_command
from tests.stack import free_port, http_ok, process, wait_for


def _env(env: dict[str, str]) -> dict[str, str]:
    # tests/stack.py closes every connection after each request (so that a test database can
    # be dropped); a benchmark measures the portal as it runs, with its connection reuse.
    return {"DB_CONN_MAX_AGE": str(settings.DATABASES["default"]["CONN_MAX_AGE"] or 0), **env}


@contextmanager
def web(log: Path, **env: str) -> Iterator[int]:
    """daphne on a free loopback port with this process's settings and `env` on top; yields the port."""
    port = free_port()
    with process(web_command("127.0.0.1", port), log, **_env(env)) as proc:
        # /healthz answers 503 without a worker: still up.
        wait_for(lambda: http_ok(f"http://127.0.0.1:{port}/healthz") or proc.poll() is not None, 90, "daphne", log)
        if proc.poll() is not None:
            raise SystemExit(f"daphne stopped at start; see {log}")
        yield port


@contextmanager
def worker(log: Path, **env: str) -> Iterator[None]:
    """A Celery worker on the ingest and default queues, as `manage.py up` starts it."""
    name = f"bench-{os.getpid()}@%h"
    with process(worker_command(name, settings.WORKER_CONCURRENCY), log, **_env(env)) as proc:
        wait_for(lambda: b"ready." in log.read_bytes() or proc.poll() is not None, 120, "worker start", log)
        if proc.poll() is not None:
            raise SystemExit(f"the Celery worker stopped at start; see {log}")
        yield


async def ask(ws: Any, question: str, collections: list[int] | None, conversation: int | None = None,
              timeout: float = 900) -> dict[str, Any]:  # fmt: skip
    """Send one `ask` on an open /ws/chat/ socket and read its events up to `done` or `error`.
    Times (ms) from sending: the first event, the first answer token, the last event."""
    sent = time.perf_counter()
    await ws.send(json.dumps({"type": "ask", "question": question, "collections": collections,
                              "conversation": conversation}))  # fmt: skip
    events: list[dict[str, Any]] = []
    first_token = None
    while True:
        event = json.loads(await asyncio.wait_for(ws.recv(), timeout=timeout))
        now = (time.perf_counter() - sent) * 1000
        events.append(event | {"at_ms": now})
        if event["type"] == "answer.delta" and first_token is None:
            first_token = now
        if event["type"] in ("done", "error"):
            break
    return {
        "ok": event["type"] == "done",
        "events": events,
        "first_event_ms": events[0]["at_ms"],
        "first_token_ms": first_token,
        "total_ms": now,
    }


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median": statistics.median(ordered), "p95": p95, "max": ordered[-1]}


def cpu() -> str:
    """The CPU's model and its AVX-512 flags, as every timing names them."""
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), "?")
    flags = sorted({flag for flag in text.split() if flag.startswith("avx512")})
    return f"{model}, {os.cpu_count()} cores, " + (" ".join(flags) if flags else "no AVX-512")
