"""The portal's counters, timers and gauges (prometheus_client), defined once here, below
every app, so that the code that does the work counts it without knowing who reads it:
providers (model calls and tokens), ingestion (pages read), the answer pipeline (answers,
their stages and abstentions). operations/metrics.py adds the web's and Celery's own and
serves them all at /metrics; docs/metrics.md says what each one means.

Every process of a machine writes its values to files in one folder (prometheus_client's
multiprocess mode; PORTAL_METRICS_DIR, which the settings put in PROMETHEUS_MULTIPROC_DIR):
the web process that answers /metrics adds up those of the workers, beat and the other web
processes there. A file is named after its process as `<host>-<pid>`, not the pid alone,
so that containers sharing one volume (docker/compose.yaml shares /data), each with its own
pid 1, never write into the same file.

Every metric has labels: a value, and its process's file, exists only once its labels are
first used, so a `manage.py` command that counts nothing leaves no file behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prometheus_client import Counter, Gauge, Histogram, multiprocess, values

_HOST = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname()) or "host"


def process_id() -> str:
    """This process in the file names: `<host>-<pid>` (no `_`, which splits the name)."""
    return f"{_HOST}-{os.getpid()}"


def host_of(identifier: str) -> tuple[str, int | None]:
    """The host and pid of a `process_id()`; pid None when it is not one of ours."""
    host, _, pid = identifier.rpartition("-")
    return host, int(pid) if pid.isdigit() else None


def this_host() -> str:
    return _HOST


_multiprocess: Any = None
_choosing = threading.Lock()


def _value(*args: Any, **kwargs: Any) -> Any:
    """prometheus_client's value class, chosen as each value is made (a label set's first
    use) rather than when a module imports it: the settings set PROMETHEUS_MULTIPROC_DIR,
    and a module imported before them (the settings import providers) must still count into
    the folder. One MultiProcessValue class per process: it owns the process's open files."""
    global _multiprocess
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return values.MutexValue(*args, **kwargs)
    with _choosing:
        if _multiprocess is None:
            forget_own_live_gauges()
            _multiprocess = values.MultiProcessValue(process_identifier=process_id)
    return _multiprocess(*args, **kwargs)


def forget_own_live_gauges() -> None:
    """A live gauge's file under this process's name is a dead process's, whose pid this one
    reuses (a container restarted): its values (websockets open then) are not ours. Counters
    under the name go on from where they were, which keeps their sums whole."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if folder:
        with contextlib.suppress(OSError):  # a scrape removed it first, or the folder is gone
            multiprocess.mark_process_dead(process_id(), folder)


values.ValueClass = _value
os.register_at_fork(after_in_child=forget_own_live_gauges)  # a Celery worker's processes


def clear_folder(folder: Path) -> None:
    """Empty the metrics folder before a machine's processes start (`manage.py up`): values
    of processes gone stay counted until then."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)


# Seconds: answers and tasks take from a second to many minutes on a small machine.
ANSWER_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 120, 300)
MODEL_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
TASK_BUCKETS = (0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)

HTTP_REQUESTS = Counter(
    "portal_http_requests",
    "HTTP requests answered, by view (URL name), method and status class.",
    ["view", "method", "status"],
)
HTTP_SECONDS = Histogram(
    "portal_http_request_duration_seconds",
    "Seconds until a view's response started, by view and method.",
    ["view", "method"],
)
WEBSOCKETS_ACCEPTED = Counter(
    "portal_websocket_connections", "Websocket connections accepted, by consumer.", ["consumer"]
)
WEBSOCKETS_CLOSED = Counter(
    "portal_websocket_closes",
    "Websocket connections the portal closed, by consumer and close code (4401 not logged in, 4404 not found).",
    ["consumer", "code"],
)
# livesum: only processes still running count (the files of a dead web are pruned at scrape).
WEBSOCKETS_OPEN = Gauge(
    "portal_websocket_connections_open",
    "Websocket connections open now, by consumer.",
    ["consumer"],
    multiprocess_mode="livesum",
)
TASKS = Counter("portal_celery_tasks", "Celery tasks that ended, by task name and state.", ["task", "state"])
TASK_SECONDS = Histogram(
    "portal_celery_task_duration_seconds", "Seconds a Celery task ran, by task name.", ["task"], buckets=TASK_BUCKETS
)
INGESTED_PAGES = Counter(
    "portal_ingestion_pages", "Pages read by ingestion runs, by file format (its parser).", ["format"]
)
ANSWERS = Counter(
    "portal_answers",
    "Answers that ended, by strategy, answer mode and outcome (answered, abstained, cancelled, disconnected, failed).",
    ["strategy", "mode", "outcome"],
)
ANSWER_SECONDS = Histogram(
    "portal_answer_stage_seconds",
    "Seconds from the question to the end of each stage of an answer, by stage and strategy.",
    ["stage", "strategy"],
    buckets=ANSWER_BUCKETS,
)
MODEL_CALLS = Counter(
    "portal_model_calls", "Model calls, by role, provider and outcome (ok, error).", ["role", "provider", "outcome"]
)
MODEL_SECONDS = Histogram(
    "portal_model_call_duration_seconds",
    "Seconds a model call took, by role and provider.",
    ["role", "provider"],
    buckets=MODEL_BUCKETS,
)
MODEL_TOKENS = Counter(
    "portal_model_tokens",
    "Tokens the chat model read (prompt) and wrote (completion), by role and provider.",
    ["role", "provider", "kind"],
)
RECONCILER_FINDINGS = Counter(
    "portal_reconciler_findings",
    "Stuck ingestion the reconciler found and acted on, by kind of finding (run_silent, run_lost, "
    "document_stuck, part_left, version_idle) and outcome (sent_back, stopped, finished, failed).",
    ["kind", "outcome"],
)
ERRORS = Counter(
    "portal_errors",
    "Errors by kind (request, task, model, answer, ingestion) and what failed: the view, the "
    "task, the model role, the answer's error code, or the ingestion's cause.",
    ["kind", "name"],
)


def answer_ended(strategy: str, mode: str, outcome: str, timings: Mapping[str, float]) -> None:
    """One answer's end: its outcome, and the time (milliseconds from the question, as the
    answer's `timings` keep them) at which each of its stages ended."""
    strategy = strategy or "none"
    ANSWERS.labels(strategy, mode or "none", outcome).inc()
    for stage, millis in timings.items():
        ANSWER_SECONDS.labels(stage, strategy).observe(millis / 1000)
