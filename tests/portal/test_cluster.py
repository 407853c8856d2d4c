"""The portal as a small cluster (issue 24), on this machine: PostgreSQL + pgvector, Redis, an
S3 API server (moto, in a subprocess), two daphne processes and two Celery workers, each with
its own empty working directory (var, media and mem0 folders of its own), so that no process
can read another's local files. What one machine stores, the others serve:

- a PDF uploaded through web A is ingested by a worker; web B serves its original (with a
  byte range), its page render (a citation's thumbnail) and its picture; nothing is written
  under any process's MEDIA_ROOT;
- a memory written by a worker is listed, with its history, through web A;
- two long PDFs are read at once, one by each worker, and one's first page is found through
  web B while its worker is still reading it;
- a worker killed mid-document leaves the other to finish it (the stale run requeued);
- an original deleted behind the portal's back is a readable 404 on web B, not a 500.

The model files are read from the one folder this machine joined them into: they are
per-machine files that every machine makes the same (docs/machines.md)."""

from __future__ import annotations

import json
import os
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from pathlib import Path

import psutil
import pytest
from django.conf import settings
from django.utils import timezone

from assistant.memory.service import memories
from assistant.models import Conversation, Message
from assistant.tasks import remember_turn
from ingestion.models import IngestionRun
from knowledge.models import Document, Page, PageImage
from portal.supervisor import web_command, worker_command
from portal.tasks import requeue_stale_runs
from tests.conftest import token_for
from tests.ingestion.test_recovery import long_pdf
from tests.sources.servers import moto_s3_server
from tests.stack import free_port, http_ok, process, wait_for

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True)]

SECRET_KEY = "the-cluster-test-shares-one-secret-key-on-every-machine"
QUEUES = "ingest,quick,default,memory"


def picture_pdf() -> bytes:
    """Two pages of policy text, the first with a photo-like picture on it."""
    import pymupdf

    from tests.ingestion.image_files import photo_jpeg

    document = pymupdf.open()
    first = document.new_page()
    first.insert_text((72, 90), "Travel policy. Hotels in Beijing are capped at 600 yuan a night.", fontsize=12)
    first.insert_image(pymupdf.Rect(72, 120, 372, 345), stream=photo_jpeg())
    second = document.new_page()
    second.insert_text((72, 90), "Taxi receipts must be filed within 30 days of the trip.", fontsize=12)
    data: bytes = document.tobytes()
    return data


@contextmanager
def machine(name: str, root: Path, s3: dict[str, str]) -> Iterator[dict[str, str]]:
    """The environment of one machine: its own empty folders, the shared services."""
    home = root / name
    for folder in ("var", "media", "mem0", "tmp"):
        (home / folder).mkdir(parents=True)
    yield {
        "PORTAL_VAR_DIR": str(home / "var"),
        "MEDIA_ROOT": str(home / "media"),
        "MEM0_DIR": str(home / "mem0"),
        "TMPDIR": str(home / "tmp"),
        "PORTAL_MODELS_DIR": str(settings.MODELS_DIR),
        "SECRET_KEY": SECRET_KEY,
        **s3,
    }


def get(port: int, path: str, key: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Token {key}", **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def post(port: int, path: str, key: str, payload: Mapping[str, object]) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(payload).encode(),
        method="POST",
        headers={"Authorization": f"Token {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def upload(port: int, key: str, collection_id: int, name: str, data: bytes) -> int:
    boundary = "clusterboundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
            "Content-Type: application/pdf\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/collections/{collection_id}/documents/",
        data=body,
        method="POST",
        headers={"Authorization": f"Token {key}", "Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
        (added,) = json.loads(response.read())
    assert not added["error"], added
    return int(added["document"])


def files_under(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()]


def test_two_webs_and_two_workers_share_files_memory_and_work(alice, private_collection, api, tmp_path):
    key = token_for(api, alice)
    logs = tmp_path / "logs"
    logs.mkdir()
    with ExitStack() as stack:
        server = stack.enter_context(moto_s3_server(logs / "moto.log"))
        bucket = "portal-cluster"
        client = server.make_bucket(bucket)
        s3 = {
            "PORTAL_STORAGE": "s3",
            "PORTAL_S3_ENDPOINT_URL": server.endpoint_url,
            "PORTAL_S3_BUCKET": bucket,
            "PORTAL_S3_REGION": server.region,
            "PORTAL_S3_ACCESS_KEY_ID": server.access_key,
            "PORTAL_S3_SECRET_ACCESS_KEY": server.secret_key,
        }
        envs = {name: stack.enter_context(machine(name, tmp_path, s3)) for name in ("web-a", "web-b", "w1", "w2")}
        ports = {}
        for name in ("web-a", "web-b"):
            ports[name] = free_port()
            proc = stack.enter_context(
                process(web_command("127.0.0.1", ports[name]), logs / f"{name}.log", **envs[name])
            )
            url = f"http://127.0.0.1:{ports[name]}/healthz"
            wait_for(lambda url=url, proc=proc: http_ok(url) or proc.poll() is not None, 90, name, logs / f"{name}.log")
            assert proc.poll() is None, (logs / f"{name}.log").read_text()
        workers = {}
        for name in ("w1", "w2"):
            log = logs / f"{name}.log"
            # One worker holds the long PDF of step 4 whole (not in parts), so that killing it
            # tests the other taking over (a document split among workers: test_split_document).
            env = {**envs[name], "PORTAL_INGEST_PART_PAGES": "0"}
            workers[name] = stack.enter_context(process(worker_command(f"{name}@%h", 1, QUEUES), log, **env))
            wait_for(lambda log=log: b"ready." in log.read_bytes(), 90, f"{name} start", log)
        a, b = ports["web-a"], ports["web-b"]

        # 1. Uploaded through A, ingested by a worker, served by B.
        data = picture_pdf()
        document_id = upload(a, key, private_collection.pk, "travel.pdf", data)
        wait_for(
            lambda: Document.objects.get(pk=document_id).status in ("ready", "failed"),
            180,
            "the upload ingested",
            logs / "w1.log",
        )
        document = Document.objects.get(pk=document_id)
        assert document.status == "ready", document.error
        status, headers, body = get(b, f"/api/documents/{document_id}/original/", key, Range="bytes=0-99")
        assert status == 206
        assert body == data[:100]
        assert headers["Content-Range"] == f"bytes 0-99/{len(data)}"
        first = Page.objects.get(document=document, number=1)
        status, headers, body = get(b, f"/api/pages/{first.pk}/render/", key)  # a citation's thumbnail
        assert status == 200
        assert body.startswith(b"\x89PNG")
        picture = PageImage.objects.filter(page=first).first()
        assert picture is not None
        status, _headers, body = get(b, f"/api/pages/{first.pk}/images/{picture.sha256}/", key)
        assert status == 200
        assert body.startswith(b"\x89PNG")
        first.refresh_from_db()  # web B drew the render on first view and stored it
        keys = {item["Key"] for item in client.list_objects_v2(Bucket=bucket).get("Contents", [])}
        assert document.file.name in keys
        assert first.render.name in keys
        for name, env in envs.items():
            assert files_under(Path(env["MEDIA_ROOT"])) == [], name  # nothing stored on any machine

        # 2. A memory written by a worker, listed with its history through A.
        conversation = Conversation.objects.create(user=alice, title="answers as tables")
        Message.objects.create(
            conversation=conversation, role=Message.Role.USER, content="以后请用表格形式回答我的问题。"
        )
        answer = Message.objects.create(conversation=conversation, role=Message.Role.ASSISTANT, content="好的。")
        remember_turn.delay(answer.pk)
        wait_for(lambda: memories().all(alice), 300, "the memory written by a worker", logs / "w1.log")
        status, _headers, body = get(a, "/api/memories/", key)
        assert status == 200
        listed = json.loads(body)
        items = listed["results"] if isinstance(listed, dict) else listed
        assert any("表格" in item["text"] for item in items), items
        memory_id = items[0]["id"]
        status, _headers, body = get(a, f"/api/memories/{memory_id}/history/", key)
        assert status == 200
        history = json.loads(body)
        events = history["results"] if isinstance(history, dict) and "results" in history else history
        assert any(event.get("event") == "ADD" for event in events), events
        for name, env in envs.items():
            assert not (Path(env["MEM0_DIR"]) / "history.db").exists(), name

        # 3. A large upload split by document: each worker reads one, and the first pages of
        # one are found through B while its worker is still reading it.
        reading_a = upload(a, key, private_collection.pk, "rules-a.pdf", long_pdf(30))
        reading_b = upload(b, key, private_collection.pk, "rules-b.pdf", long_pdf(30))
        both = [reading_a, reading_b]
        running = IngestionRun.objects.filter(document_id__in=both, status=IngestionRun.Status.RUNNING)
        wait_for(lambda: running.count() == 2, 120, "both documents read at once", logs / "w1.log")

        def found_while_read() -> bool:
            reading = Document.objects.get(pk=reading_a).status == Document.Status.PROCESSING
            query = {"query": "Chapter 1. Rule 1 says travel costs", "collections": [private_collection.pk]}
            status, _headers, body = post(b, "/api/search/", key, {**query, "rerank": False})
            assert status == 200, body
            hits = json.loads(body)["hits"]
            return reading and any(hit["document_id"] == reading_a and hit["page_number"] == 1 for hit in hits)

        wait_for(found_while_read, 120, "page 1 found while its document is read", logs / "w1.log")
        wait_for(
            lambda: set(Document.objects.filter(pk__in=both).values_list("status", flat=True)) == {"ready"},
            240,
            "both documents ready",
            logs / "w2.log",
        )

        # 4. A worker killed mid-document: the other finishes it.
        long_id = upload(a, key, private_collection.pk, "long.pdf", long_pdf(60))
        run = IngestionRun.objects.filter(document_id=long_id).latest("created_at")
        wait_for(lambda: IngestionRun.objects.get(pk=run.pk).progress >= 3, 180, "a few pages", logs / "w1.log")
        busy = busy_worker(workers)
        for proc in [psutil.Process(workers[busy].pid), *psutil.Process(workers[busy].pid).children(recursive=True)]:
            os.kill(proc.pid, signal.SIGKILL)
        workers[busy].wait()
        run.refresh_from_db()
        assert run.status == "running", run.status  # killed mid-document
        assert run.progress < 60
        silent = timezone.now() - timedelta(minutes=settings.RUN_STALE_MINUTES + 1)
        IngestionRun.objects.filter(pk=run.pk).update(heartbeat_at=silent)
        assert requeue_stale_runs() == 1  # beat's minute check: the same run queued again
        again = run
        wait_for(
            lambda: IngestionRun.objects.get(pk=again.pk).status not in ("queued", "running"),
            240,
            "the other worker finished the document",
            logs / ("w2.log" if busy == "w1" else "w1.log"),
        )
        assert IngestionRun.objects.get(pk=again.pk).status == "succeeded"
        assert Document.objects.get(pk=long_id).status == "ready"

        # 5. An original deleted behind the portal's back: a readable 404 on B.
        client.delete_object(Bucket=bucket, Key=document.file.name)
        status, headers, body = get(b, f"/api/documents/{document_id}/original/", key)
        assert status == 404
        assert headers["Content-Type"].startswith("application/json")
        assert json.loads(body)["detail"]
        for name in ("web-a", "web-b"):
            assert b"Traceback" not in (logs / f"{name}.log").read_bytes(), name


def busy_worker(workers: Mapping[str, object]) -> str:
    """The worker holding the ingestion task, asked through Celery's remote control."""
    from celery import current_app

    wait_for(lambda: bool(_active(current_app)), 30, "a worker to report its task")
    (holder,) = [name.split("@")[0] for name, tasks in _active(current_app).items() if tasks]
    return holder


def _active(app: object) -> dict[str, list[object]]:
    inspector = app.control.inspect(timeout=2.0)  # type: ignore[attr-defined]
    return {name: tasks for name, tasks in (inspector.active() or {}).items() if tasks}
