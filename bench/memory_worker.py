"""Memory extraction beside uploads and answers (issue 19), with real Celery workers, the real
local chat model, PostgreSQL and Redis. Prints the figures and writes
bench/results/memory-worker.json.

    .venv/bin/python bench/memory_worker.py          # about 10 minutes on 2 cores

1. Uploads: a two-line Markdown file, from upload to its ingestion run done (searchable),
   while --queued extractions (statements of tests/files/memory/turns.jsonl) wait, --uploads
   times in each of two set-ups: "shared", one worker serving ingest, default and memory (one
   process for everything, as before the memory queue), and "split", the portal's: a worker
   for ingest and default, and a memory worker.
2. Answers: --questions document questions answered in this process by the local chat model
   (as the web process answers), each with memory off and then on; while memory is on, the
   memory worker holds --queued extractions (it waits while an answer is marked). Also how
   many extractions ran while answers were being written, and the memory worker's RAM.

The machine is shared: compare medians and ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("MEM0_TELEMETRY", "False")

import django  # noqa: E402

django.setup()

import psutil  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402

from assistant.answering.pipeline import answer_events, start  # noqa: E402
from assistant.memory.service import memories  # noqa: E402
from assistant.models import Conversation, Message  # noqa: E402
from assistant.tasks import remember_turn  # noqa: E402
from ingestion.actions import do_add_document  # noqa: E402
from ingestion.models import IngestionRun  # noqa: E402
from knowledge import actions  # noqa: E402
from portal.celery import app  # noqa: E402
from portal.supervisor import MEMORY_QUEUE, WORK_QUEUES, worker_command  # noqa: E402
from tests.assistant.chat_files import files, ingest_files  # noqa: E402
from tests.stack import process, wait_for  # noqa: E402

OUT = ROOT / "bench" / "results" / "memory-worker.json"
TURNS = ROOT / "tests" / "files" / "memory" / "turns.jsonl"
QUESTIONS = [
    "年假有几天？",
    "报销单要在多久内提交？",
    "Falcon 路由器的保修期是多久？",
    "How many days of annual leave do employees get?",
    "Heron 交换机有多少个端口？",
    "未休完的年假可以累积多少天？",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queued", type=int, default=20)
    parser.add_argument("--uploads", type=int, default=3)
    parser.add_argument("--questions", type=int, default=len(QUESTIONS))
    args = parser.parse_args()
    stamp = uuid.uuid4().hex[:8]
    user = get_user_model().objects.create_user(
        username=f"bench-memw-{stamp}", email=f"bench-memw-{stamp}@example.com", password=None
    )
    logs = Path(tempfile.mkdtemp(prefix="portal-bench-memory-worker-"))
    results: dict[str, Any] = {"queued": args.queued, "logs": str(logs)}
    try:
        collection = actions.do_create_collection(user, f"bench-memw-{stamp}")
        ingest_files(collection, files())
        results["uploads"] = {setup: uploads(user, collection, setup, args, logs) for setup in ("shared", "split")}
        results["answers"] = answers(user, collection, args, logs)
    finally:
        drain()
        memories().delete_all(user)
        user.delete()
    OUT.write_text(json.dumps(results, ensure_ascii=False, indent=1))
    print(json.dumps({k: v for k, v in results.items() if k != "logs"}, ensure_ascii=False, indent=1))
    print(f"written: {OUT}")


@contextmanager
def workers(setup: str, logs: Path) -> Iterator[list[psutil.Process]]:
    """The set-up's workers, started and ready; their processes."""
    commands = {
        "shared": [("all", worker_command(f"bench-all-{os.getpid()}@%h", 1, f"{WORK_QUEUES},{MEMORY_QUEUE}"))],
        "split": [
            ("work", worker_command(f"bench-work-{os.getpid()}@%h", settings.WORKER_CONCURRENCY)),
            ("memory", worker_command(f"bench-memory-{os.getpid()}@%h", 1, MEMORY_QUEUE)),
        ],
    }[setup]
    with ExitStack() as stack:
        started = []
        for name, command in commands:
            log = logs / f"{setup}-{name}.log"
            proc = stack.enter_context(process(command, log))
            wait_for(lambda log=log: b"ready." in log.read_bytes(), 120, f"{name} worker", log)
            started.append(psutil.Process(proc.pid))
        yield started


def queue_extractions(user: Any, count: int) -> None:
    rows = [json.loads(line) for line in TURNS.read_text().splitlines() if line.strip()]
    statements = [row["text"] for row in rows if row["keep"] and row["kind"] == "statement"]
    for n in range(count):
        conversation = Conversation.objects.create(user=user, title="bench")
        Message.objects.create(conversation=conversation, role="user", content=statements[n % len(statements)])
        answer = Message.objects.create(conversation=conversation, role="assistant", content="好的。")
        remember_turn.delay(answer.pk)


def stored(user: Any) -> int:
    return len(memories().all(user))


def drain() -> None:
    """Drop what is still queued for the memory worker (between set-ups, and at the end)."""
    with app.connection_for_write() as connection:
        connection.default_channel.queue_purge(MEMORY_QUEUE)  # type: ignore[attr-defined]


def uploads(user: Any, collection: Any, setup: str, args: argparse.Namespace, logs: Path) -> dict[str, Any]:
    memories().delete_all(user)
    seconds = []
    with workers(setup, logs):
        queue_extractions(user, args.queued)
        wait_for(lambda: stored(user) > 0, 300, "the first extraction")  # extraction is under way
        for n in range(args.uploads):
            content = f"# Note {n}\n\nThe bench code word is zebra{uuid.uuid4().hex[:6]}.\n".encode()
            started = time.perf_counter()
            _document, run = do_add_document(collection, f"note-{setup}-{n}.md", content, enqueue=True)
            assert run is not None
            wait_for(lambda run=run: _done(run), 600, "the upload")
            seconds.append(time.perf_counter() - started)
            print(f"{setup}: upload {n + 1} searchable after {seconds[-1]:.1f} s ({stored(user)} memories)", flush=True)
        extracted = stored(user)
    drain()
    return {"seconds": seconds, "median_s": statistics.median(seconds), "memories_stored_meanwhile": extracted}


def _done(run: IngestionRun) -> bool:
    run.refresh_from_db(fields=["status"])
    if run.status == IngestionRun.Status.FAILED:
        raise SystemExit(f"the upload failed: {run.pk}")
    return run.status == IngestionRun.Status.SUCCEEDED


def answers(user: Any, collection: Any, args: argparse.Namespace, logs: Path) -> dict[str, Any]:
    memories().delete_all(user)
    rows = []
    list(answer_events(start(user, "你好", collection_ids=[collection.pk])))  # loads the model here
    with workers("split", logs) as (_work, memory):
        queue_extractions(user, args.queued)
        wait_for(lambda: stored(user) > 0, 300, "the first extraction")
        rss = sum(p.memory_info().rss for p in [memory, *memory.children(recursive=True)])
        for question in QUESTIONS[: args.questions]:
            row: dict[str, Any] = {"question": question}
            for state in ("off", "on"):
                settings.MEMORY_ENABLED = state == "on"
                before = stored(user)
                started = time.perf_counter()
                events = list(answer_events(start(user, question, collection_ids=[collection.pk])))
                row[state] = time.perf_counter() - started
                row[f"{state}_extractions_meanwhile"] = stored(user) - before
                assert events[-1].type == "done", events[-1]
            print(f"answer off {row['off']:5.1f} s, on {row['on']:5.1f} s  {question}", flush=True)
            rows.append(row)
        settings.MEMORY_ENABLED = True
    off = statistics.median(row["off"] for row in rows)
    on = statistics.median(row["on"] for row in rows)
    return {
        "p50_off_s": off,
        "p50_on_s": on,
        "ratio_on_off": on / off,
        "extractions_while_answering": sum(row["on_extractions_meanwhile"] for row in rows),
        "memory_worker_rss_mb": round(rss / 2**20),
        "questions": rows,
    }


if __name__ == "__main__":
    main()
