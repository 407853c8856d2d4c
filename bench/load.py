"""Load: concurrent websocket chats and REST uploads against a running portal; prints figures,
writes bench/results/load.json and bench/results/load.png, and exits 1 on any server error
or anything lost.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/load.py [--chats 50] [--uploads 10]
        [--users 10] [--time-limit 240] [--local-model]

Everything on loopback, as the embedded setup runs it: a real daphne, a real Celery worker
(`manage.py up`'s command and concurrency), the configured PostgreSQL + pgvector and Redis,
the local e5 embedder and OCR. --users users each get a private collection with three small
documents (tests/assistant/chat_files.py) and an API token. Then, at the same moment:
--chats websockets each ask one question in their user's collection, and --uploads clients
each POST a PDF, a DOCX and a Markdown file (tests/ingestion generators, made unique per
client) to /api/collections/<id>/documents/ and poll the list until every document is ready.

The chat model is, by default, a scripted OpenAI-compatible server on loopback
(tests/providers/wire.py; PROVIDER_CHAT=openai, BASE_URL_CHAT): each reply after
--model-delay seconds, the answer streamed a token every --token-interval seconds. The local
Qwen answers one question at a time, so 50 chats with it measure that queue; with the
scripted model the figures are the portal's: sockets, retrieval on pgvector with the local
embedder, persistence, Channels, Celery (memory extraction after each answer, ingestion).
--local-model uses the configured chat model instead (default --chats 3).

Measured per chat: time to the first event, the first answer token and `done`; per upload:
the request's latency and each document's time to ready (from sending the request). After
the load, every question must have its stored answer message (the streamed text) and every
upload a ready Document with chunks. Items still running at --time-limit count as timeouts.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import os
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
OUT = ROOT / "bench" / "results"
LOGS = Path(tempfile.gettempdir()) / "portal-bench-load"

QUESTIONS = [
    "未休完的年假可以累积到下一年吗？",
    "How many days of paid annual leave do employees get?",
    "报销单须在出差结束后多久内提交？",
    "Falcon 路由器的保修期是多久？",
    "How many ports does the Heron switch have?",
]
MEMORY = "用户在查阅公司的制度和产品资料"


@dataclass(frozen=True)
class Setup:
    users: list[Any]
    collections: list[int]
    keys: list[str]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chats", type=int, help="websocket chats at once (default 50; 3 with --local-model)")
    parser.add_argument("--uploads", type=int, default=10, help="upload clients at once, 3 files each")
    parser.add_argument("--users", type=int, default=10, help="users, each with a collection and a token")
    parser.add_argument("--time-limit", type=float, default=240, help="seconds for the load, chats and uploads")
    parser.add_argument("--local-model", action="store_true", help="the configured chat model, not the script")
    parser.add_argument("--model-delay", type=float, default=0.5, help="scripted model: seconds before a reply")
    parser.add_argument("--token-interval", type=float, default=0.03, help="scripted model: seconds per token")
    parser.add_argument("--name", default="load", help="results as bench/results/<name>.json and .png")
    args = parser.parse_args()
    args.chats = args.chats if args.chats is not None else (3 if args.local_model else 50)

    import django

    django.setup()
    from bench.common import web, worker

    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request otherwise

    LOGS.mkdir(parents=True, exist_ok=True)
    with chat_model(args) as (model_env, model_label):
        print(f"chat model: {model_label}", flush=True)
        setup = prepare(args.users)
        try:
            with web(LOGS / "daphne.log", **model_env) as port, worker(LOGS / "worker.log", **model_env):
                print(f"daphne on 127.0.0.1:{port}, worker ready; warming up …", flush=True)
                warm = asyncio.run(warm_up(port, setup))
                marks = {name: log_size(name) for name in ("daphne.log", "worker.log")}
                print(f"{args.chats} chats and {args.uploads} uploads at once …", flush=True)
                started = time.perf_counter()
                chats, uploads, statuses = asyncio.run(load(port, setup, args))
                wall = time.perf_counter() - started
                drained = drain(180)
                tracebacks = {name: count_tracebacks(name, offset) for name, offset in marks.items()}
            verify(chats, uploads)
        finally:
            cleanup(setup)
    results = figures(args, model_label, chats, uploads, statuses, wall, tracebacks, drained)
    results["raw"] = {"warm_up": warm, "chats": chats, "uploads": uploads}
    report(results, args.name)
    sys.exit(1 if results["failed"] else 0)


# The scripted chat model


def scripted(delay: float, interval: float) -> Callable[[str, Any], Any]:
    """Replies as the portal's prompts expect them: mem0's extraction keeps one memory, the
    router says direct (every question here is), an answer restates passage [1] and cites it."""
    from mem0.configs.prompts import ADDITIVE_EXTRACTION_PROMPT

    from tests.providers.wire import Reply, chunks, completion

    def respond(path: str, body: Any) -> Reply:
        messages = body["messages"]
        system, user = messages[0]["content"], messages[-1]["content"]
        if system.startswith(ADDITIVE_EXTRACTION_PROMPT[:200]):
            found = [{"id": "0", "text": MEMORY, "attributed_to": "user"}]
            return Reply(body=completion(json.dumps({"memory": found}, ensure_ascii=False)), delay=delay)
        if not body.get("stream"):
            return Reply(body=completion('{"strategy": "direct", "reason": "clear"}'), delay=delay)
        passage = re.search(r"^\[1\] .*?: (.+)$", user, re.MULTILINE)
        answer = f"{passage.group(1)[:90]} [1]" if passage else "The documents do not contain the answer."
        return Reply(body=chunks(*re.findall(r".{1,3}", answer, re.DOTALL)), delay=delay, pace=interval)

    return respond


@contextmanager
def chat_model(args: argparse.Namespace) -> Iterator[tuple[dict[str, str], str]]:
    """The children's chat model settings, and what to call it in the results."""
    if args.local_model:
        from django.conf import settings

        config = settings.MODEL_ROLES["chat"]
        yield {}, f"{config.provider}: {config.model}"
        return
    from tests.providers.wire import serve

    with serve() as server:
        server.responder = scripted(args.model_delay, args.token_interval)
        env = {"PROVIDER_CHAT": "openai", "BASE_URL_CHAT": f"{server.url}/v1", "API_KEY_CHAT": "sk-bench"}
        yield (
            env,
            (
                f"scripted OpenAI-compatible server on loopback (not a model): each reply after "
                f"{args.model_delay:g} s, answers streamed a token every {args.token_interval:g} s"
            ),
        )


# Users, collections, files


def prepare(count: int) -> Setup:
    from django.contrib.auth import get_user_model

    from knowledge import actions
    from tests.assistant.chat_files import files, ingest_files

    stamp = f"{time.time():.0f}"
    model = get_user_model()
    users = [
        model.objects.create(username=f"bench-load-{stamp}-{n}", email=f"load{n}-{stamp}@localhost")
        for n in range(count)
    ]
    collections = []
    print(f"indexing 3 files into each of {count} users' collections …", flush=True)
    for n, user in enumerate(users):
        collection = actions.do_create_collection(user, f"bench load {stamp} {n}")
        ingest_files(collection, files())
        collections.append(collection.pk)
    keys = [actions.do_create_token(user, "bench load")[1] for user in users]
    return Setup(users, collections, keys)


def upload_files(client: str) -> dict[str, bytes]:
    """A PDF, a DOCX and a Markdown file from the test generators, each with a line naming the
    client so that no upload repeats another's content."""
    import docx
    import pymupdf

    from tests.ingestion.files import handbook_pdf
    from tests.ingestion.office_files import handbook_docx

    line = f"Upload client {client}: reference number {client}."
    with tempfile.TemporaryDirectory() as tmp:
        with pymupdf.open(handbook_pdf(Path(tmp) / "h.pdf")) as pdf:
            pdf[0].insert_text((72, 480), line, fontsize=11)
            pdf_bytes = pdf.tobytes()
        word = docx.Document(str(handbook_docx(Path(tmp) / "h.docx")))
        word.add_paragraph(line)
        buffer = io.BytesIO()
        word.save(buffer)
    notes = f"# Notes {client}\n\n{line}\n\nHotels are capped by city tier. 住宿按城市等级限额。\n"
    return {
        f"handbook-{client}.pdf": pdf_bytes,
        f"handbook-{client}.docx": buffer.getvalue(),
        f"notes-{client}.md": notes.encode(),
    }


def cleanup(setup: Setup) -> None:
    from knowledge import actions
    from knowledge.models import Collection

    for collection in Collection.objects.filter(pk__in=setup.collections):
        actions.do_delete_collection(collection)
    for user in setup.users:
        user.delete()  # with their conversations, tokens and memories


# The load


async def warm_up(port: int, setup: Setup) -> dict[str, Any]:
    """One chat and one upload before the clock starts: the web process's and the worker's
    models load on first use, and a running portal has loaded them."""
    import httpx

    deadline = time.monotonic() + 300
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        chat_row, upload_row = await asyncio.gather(
            chat(port, setup.keys[0], setup.collections[0], QUESTIONS[0], deadline),
            upload(
                client, setup.keys[0], setup.collections[0], upload_files("warm"), time.monotonic() + 300, Counter()
            ),
        )
    if chat_row["error"] or upload_row["error"]:
        raise SystemExit(f"warm-up failed: chat {chat_row}, upload {upload_row}")
    return {"chat": chat_row, "upload": upload_row}


async def load(port: int, setup: Setup, args: argparse.Namespace) -> tuple[list[dict], list[dict], Counter[str]]:
    import httpx

    deadline = time.monotonic() + args.time_limit
    statuses: Counter[str] = Counter()
    users = len(setup.keys)
    files = [upload_files(str(n)) for n in range(args.uploads)]  # made before the clock starts
    limits = httpx.Limits(max_connections=args.uploads + 5)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits) as client:
        chats = [
            chat(port, setup.keys[n % users], setup.collections[n % users], QUESTIONS[n % len(QUESTIONS)], deadline)
            for n in range(args.chats)
        ]
        uploads = [
            upload(client, setup.keys[n % users], setup.collections[n % users], files[n], deadline, statuses)
            for n in range(args.uploads)
        ]
        done = await asyncio.gather(asyncio.gather(*chats), asyncio.gather(*uploads))
    return list(done[0]), list(done[1]), statuses


def left(deadline: float) -> float:
    return max(0.1, deadline - time.monotonic())


async def chat(port: int, key: str, collection: int, question: str, deadline: float) -> dict[str, Any]:
    """One user's socket asking one question; the row says what went wrong, if anything."""
    import websockets

    from bench.common import ask

    row: dict[str, Any] = {"question": question, "collection": collection, "error": "", "detail": ""}
    opened = time.perf_counter()
    url = f"ws://127.0.0.1:{port}/ws/chat/"
    try:
        async with websockets.connect(
            url, additional_headers={"Authorization": f"Token {key}"}, open_timeout=left(deadline)
        ) as ws:
            row["connect_ms"] = (time.perf_counter() - opened) * 1000
            asked = await ask(ws, question, [collection], timeout=left(deadline))
    except TimeoutError as exc:
        return row | {"error": "timeout", "detail": repr(exc)}
    except (OSError, websockets.WebSocketException) as exc:
        return row | {"error": "websocket", "detail": repr(exc)}
    events = asked.pop("events")
    row |= asked
    row["event_types"] = dict(Counter(event["type"] for event in events))
    row["answer"] = "".join(event["text"] for event in events if event["type"] == "answer.delta")
    first, last = events[0], events[-1]
    row["conversation"], row["question_message"] = first.get("conversation"), first.get("message")
    row["answer_message"] = last.get("message")
    if last["type"] == "error":
        row |= {"error": f"error event: {last.get('code')}", "detail": last.get("message", "")}
    return row


async def upload(
    client: Any, key: str, collection: int, files: dict[str, bytes], deadline: float, statuses: Counter[str]
) -> dict[str, Any]:
    """POST the files in one request, then poll the collection's documents until each is ready
    or failed; times from sending the request."""
    import httpx

    headers = {"Authorization": f"Token {key}"}
    row: dict[str, Any] = {"collection": collection, "files": list(files), "error": "", "detail": "", "ready_ms": {}}
    sent = time.perf_counter()
    try:
        response = await client.post(
            f"/api/collections/{collection}/documents/",
            files=[("files", (name, data)) for name, data in files.items()],
            headers=headers,
            timeout=left(deadline),
        )
    except httpx.TimeoutException as exc:
        return row | {"error": "timeout", "detail": repr(exc)}
    except httpx.HTTPError as exc:
        return row | {"error": "http connection", "detail": repr(exc)}
    statuses[f"POST {response.status_code}"] += 1
    row["status"], row["latency_ms"] = response.status_code, (time.perf_counter() - sent) * 1000
    if response.status_code != 201:
        kind = "http 5xx" if response.status_code >= 500 else f"http {response.status_code}"
        return row | {"error": kind, "detail": response.text[:500]}
    row["documents"] = {item["name"]: item["document"] for item in response.json()}
    refused = [item for item in response.json() if item["error"] or item["unchanged"]]
    if refused:
        return row | {"error": "file refused", "detail": json.dumps(refused, ensure_ascii=False)}
    return await until_ready(client, headers, row, sent, deadline, statuses)


async def until_ready(
    client: Any, headers: dict[str, str], row: dict[str, Any], sent: float, deadline: float, statuses: Counter[str]
) -> dict[str, Any]:
    import httpx

    waiting = {pk: name for name, pk in row["documents"].items()}
    while waiting:
        if time.monotonic() >= deadline:
            return row | {"error": "timeout", "detail": f"not ready: {sorted(waiting.values())}"}
        await asyncio.sleep(0.5)
        try:
            response = await client.get(
                f"/api/collections/{row['collection']}/documents/", headers=headers, timeout=left(deadline)
            )
        except httpx.HTTPError as exc:
            return row | {"error": "timeout" if isinstance(exc, httpx.TimeoutException) else "http connection",
                          "detail": repr(exc)}  # fmt: skip
        statuses[f"GET {response.status_code}"] += 1
        if response.status_code != 200:  # counted; a client asks again
            row["detail"] = f"GET {response.status_code}: {response.text[:300]}"
            continue
        for document in response.json()["results"]:
            if document["id"] in waiting and document["status"] in ("ready", "failed"):
                name = waiting.pop(document["id"])
                row["ready_ms"][name] = (time.perf_counter() - sent) * 1000
                if document["status"] == "failed":
                    row |= {"error": "document failed", "detail": f"{name}: {document['error']}"}
    return row


# After the load


def drain(timeout: float) -> float | None:
    """Wait for the worker to finish what the load queued (memory cards after each answer),
    so that nothing is cut off when it stops; the seconds it took, None past `timeout`."""
    from django.conf import settings
    from redis import Redis

    from portal.celery import app

    started = time.monotonic()
    broker = Redis.from_url(settings.REDIS_URL)
    while time.monotonic() - started < timeout:
        queued = sum(broker.llen(queue) for queue in ("default", "ingest"))
        active = app.control.inspect(timeout=1).active() or {}
        if not queued and not any(active.values()):
            return time.monotonic() - started
        time.sleep(1)
    return None


def log_size(name: str) -> int:
    return (LOGS / name).stat().st_size


def count_tracebacks(name: str, offset: int) -> int:
    with (LOGS / name).open("rb") as log:
        log.seek(offset)
        return log.read().count(b"Traceback (most recent call last)")


def verify(chats: list[dict], uploads: list[dict]) -> None:
    """Nothing lost: each question and its answer are stored as sent, each uploaded file is a
    ready document with chunks. Marks each row `stored`."""
    from assistant.models import Message
    from knowledge.models import Chunk, Document

    for row in chats:
        question = Message.objects.filter(
            pk=row.get("question_message") or 0, role=Message.Role.USER, content=row["question"]
        ).first()
        answer = Message.objects.filter(pk=row.get("answer_message") or 0, role=Message.Role.ASSISTANT).first()
        row["stored"] = bool(
            question
            and answer
            and answer.conversation_id == question.conversation_id == row.get("conversation")
            and answer.content == row["answer"] != ""
            and not answer.error
        )
    for row in uploads:
        ids = list(row.get("documents", {}).values())
        ready = Document.objects.filter(pk__in=ids, status=Document.Status.READY)
        with_chunks = {pk for pk in ready.values_list("pk", flat=True) if Chunk.objects.filter(document_id=pk).exists()}
        row["stored"] = bool(ids) and len(ids) == len(row["files"]) and with_chunks == set(ids)


def figures(
    args: argparse.Namespace,
    model: str,
    chats: list[dict],
    uploads: list[dict],
    statuses: Counter[str],
    wall: float,
    tracebacks: dict[str, int],
    drained: float | None,
) -> dict[str, Any]:
    from bench.common import summary

    def series(rows: list[dict], key: str) -> dict[str, float]:
        values = [row[key] for row in rows if row.get(key) is not None]
        return summary(values) | {"count": len(values)} if values else {"count": 0}

    ready = [{"ready_ms": ms} for row in uploads for ms in row["ready_ms"].values()]
    errors: Counter[str] = Counter(row["error"] for row in chats + uploads if row["error"] not in ("", "http 5xx"))
    errors["http 5xx"] = sum(count for status, count in statuses.items() if status.split()[1].startswith("5"))
    errors["answers missing"] = sum(not row["stored"] for row in chats)
    errors["uploads lost"] = sum(not row["stored"] for row in uploads)
    errors["server tracebacks"] = sum(tracebacks.values())
    errors["worker still busy 180 s after the load"] = int(drained is None)
    from django.conf import settings

    return {
        "chat_model": model,
        "db_conn_max_age": settings.DATABASES["default"]["CONN_MAX_AGE"],
        "cpus": os.cpu_count(),
        "load_average_1min_after": os.getloadavg()[0],
        "counts": {"chats": args.chats, "uploads": args.uploads, "files_per_upload": 3, "users": args.users},
        "time_limit_s": args.time_limit,
        "wall_s": wall,
        "worker_idle_after_s": drained,
        "chat": {key: series(chats, key) for key in ("connect_ms", "first_event_ms", "first_token_ms", "total_ms")},
        "upload": {"latency_ms": series(uploads, "latency_ms"), "ready_ms": series(ready, "ready_ms")},
        "http_statuses": dict(statuses),
        "errors": {kind: count for kind, count in errors.items() if count},
        "stored": {
            "answers": f"{sum(row['stored'] for row in chats)}/{len(chats)}",
            "uploads": f"{sum(row['stored'] for row in uploads)}/{len(uploads)}",
        },
        "failed": any(errors.values()),
    }


def report(results: dict[str, Any], name: str) -> None:
    print(f"\nchat model: {results['chat_model']}")
    print(f"DB_CONN_MAX_AGE {results['db_conn_max_age']}; {results['cpus']} CPUs, "
          f"load average {results['load_average_1min_after']:.1f} after the load")  # fmt: skip
    counts = results["counts"]
    print(f"{counts['chats']} chats and {counts['uploads']} uploads ({counts['files_per_upload']} files each) "
          f"by {counts['users']} users at once; all finished in {results['wall_s']:.1f} s")  # fmt: skip
    lines = [("chat", key, line) for key, line in results["chat"].items()]
    lines += [("upload", key, line) for key, line in results["upload"].items()]
    for group, key, line in lines:
        if line["count"]:
            print(f"{group:6} {key:15} p50 {line['median']:9.1f} ms   p95 {line['p95']:9.1f} ms   "
                  f"max {line['max']:9.1f} ms   (n={line['count']})")  # fmt: skip
    idle = results["worker_idle_after_s"]
    print(f"worker idle {idle:.0f} s after the load" if idle is not None else "worker still busy 180 s after the load")
    print(f"HTTP statuses: {results['http_statuses']}")
    print(f"stored: answers {results['stored']['answers']}, uploads ready with chunks {results['stored']['uploads']}")
    print(f"errors: {results['errors'] or 'none'}")
    for row in results["raw"]["chats"] + results["raw"]["uploads"]:
        if row["error"]:
            print(f"  {row['error']}: {row['detail'][:300]}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(results, indent=2, ensure_ascii=False))
    plot(results, OUT / f"{name}.png")
    print(f"{'FAILED' if results['failed'] else 'ok'}: written bench/results/{name}.json and .png (logs in {LOGS})")


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    panels = [
        (axes[0], "chat", [("first_event_ms", "first event"), ("first_token_ms", "first token"), ("total_ms", "done")]),
        (axes[1], "upload", [("latency_ms", "request"), ("ready_ms", "ready")]),
    ]
    width = 0.27
    for axis, group, keys in panels:
        shown = [(key, label) for key, label in keys if results[group][key]["count"]]
        xs = range(len(shown))
        for offset, stat in ((-width, "median"), (0.0, "p95"), (width, "max")):
            heights = [results[group][key][stat] / 1000 for key, _ in shown]
            axis.bar([x + offset for x in xs], heights, width, label="p50" if stat == "median" else stat)
        axis.set_xticks(list(xs), [label for _, label in shown])
        axis.set_ylabel("s")
        axis.legend(fontsize=8)
    counts = results["counts"]
    axes[0].set_title(f"{counts['chats']} websocket chats at once", fontsize=10)
    axes[1].set_title(f"{counts['uploads']} uploads × {counts['files_per_upload']} files at once", fontsize=10)
    errors = ", ".join(f"{kind}: {count}" for kind, count in results["errors"].items()) or "no errors, nothing lost"
    figure.suptitle(f"{errors}\nchat model: {results['chat_model']}", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
