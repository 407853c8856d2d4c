"""Nothing is left stuck (issue 60): every file uploaded ends `ready`, or `failed` with a
reason a person can act on, within a bound, with real parts: daphne serving the REST API
(multipart uploads, as the page sends them), two Celery worker processes sharing the queues,
PostgreSQL and Redis. One daphne and two workers serve the whole module.

The first files of a new collection, run at once by both workers, once left a document
pending for ever (the first-version race, tests/ingestion/test_first_version_race.py for the
unit): here at least 20 new collections get a batch each, then more during a reindex. A
document or a collection deleted under its runs, and bad input (an empty file, a corrupt PDF,
an original gone from storage), end cleanly while the rest of their upload is indexed.

Covered elsewhere, with real processes: a worker killed with SIGKILL mid-document, its run
queued again and the document ready (tests/ingestion/test_recovery.py); PostgreSQL and Redis
restarted mid-run (tests/hardening/test_faults.py,
test_a_document_indexed_across_a_server_restart_ends_ready)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from django.db.models import QuerySet
from django.test import override_settings

from ingestion.models import IngestionRun
from knowledge import actions
from knowledge.models import Chunk, Collection, Document, IndexedDocument, IndexVersion, Page
from portal.supervisor import WORK_QUEUES, web_command, worker_command
from tests.ingestion.files import png
from tests.ingestion.runs import kept_statistics, recounted
from tests.ingestion.test_recovery import long_pdf
from tests.stack import free_port, http_ok, process, wait_for

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True)]

ROUNDS = 20
ROUND_SECONDS = 90  # a batch of seven small files on two workers takes a few seconds
BAD = Path(__file__).resolve().parent.parent / "files" / "bad"
ACTIVE_RUNS = (IngestionRun.Status.QUEUED, IngestionRun.Status.RUNNING)
UNFINISHED = (Document.Status.PENDING, Document.Status.PROCESSING)
# What a readable message never holds (as tests/hardening/test_bad_input.py checks it).
UNREADABLE = re.compile(r"Traceback|\bNone\b|/tmp/|/work/|/var/|originals/|\.py\b|<_io\.|object at 0x")
TASK_LINE = re.compile(r"Task ingestion\.ingest_document\[([0-9a-f-]+)\] (received|succeeded|raised|retry|failed)")


@dataclass
class Portal:
    port: int
    media: Path
    workers: list[str]  # the workers' node names
    logs: list[Path]  # the workers' logs

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def marks(self) -> list[int]:
        """Where each worker's log ends now: what a test finds after it is its own."""
        return [log.stat().st_size for log in self.logs]

    def since(self, marks: list[int]) -> str:
        return "".join(
            log.read_bytes()[mark:].decode(errors="replace") for log, mark in zip(self.logs, marks, strict=True)
        )

    def took(self, marks: list[int]) -> list[int]:
        """How many ingestion tasks each worker received since `marks`."""
        lines = [log.read_bytes()[mark:].decode(errors="replace") for log, mark in zip(self.logs, marks, strict=True)]
        return [sum(what == "received" for _task, what in TASK_LINE.findall(text)) for text in lines]

    def idle(self) -> bool:
        """Every ingestion task a worker received has ended (a retry is received again)."""
        open_tasks: set[str] = set()
        for log in self.logs:
            for task, what in TASK_LINE.findall(log.read_text(errors="replace")):
                if what == "received":
                    open_tasks.add(task)
                else:
                    open_tasks.discard(task)
        return not open_tasks


@pytest.fixture(scope="module")
def portal(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Portal]:
    logs = tmp_path_factory.mktemp("nothing-stuck")
    media = logs / "media"
    host = socket.gethostname()
    names = [f"stuck-{n}-{os.getpid()}" for n in (1, 2)]
    port = free_port()
    # Uploads of many rounds within a minute are more than a person sends: no upload limit here.
    with override_settings(MEDIA_ROOT=media):
        web = process(web_command("127.0.0.1", port), logs / "daphne.log", PORTAL_UPLOAD_FILES_PER_MINUTE="100000")
        first = process(worker_command(f"{names[0]}@%h", 1, WORK_QUEUES), logs / "worker1.log")
        second = process(worker_command(f"{names[1]}@%h", 1, WORK_QUEUES), logs / "worker2.log")
        with web as daphne, first as one, second as two:
            wait_for(lambda: http_ok(f"http://127.0.0.1:{port}/healthz") or daphne.poll() is not None, 60, "daphne")
            worker_logs = [logs / "worker1.log", logs / "worker2.log"]
            started(one, worker_logs[0])
            started(two, worker_logs[1])
            yield Portal(port, media, [f"{name}@{host}" for name in names], worker_logs)


def started(worker: subprocess.Popen[bytes], log: Path) -> None:
    wait_for(lambda: b"ready." in log.read_bytes() or worker.poll() is not None, 90, "worker start", log)
    assert worker.poll() is None, log.read_text()


@pytest.fixture
def api(portal: Portal, alice) -> requests.Session:
    """alice's API token, on the live daphne."""
    _token, key = actions.do_create_token(alice, "tests")
    session = requests.Session()
    session.headers["Authorization"] = f"Token {key}"
    return session


@contextmanager
def paused(portal: Portal) -> Iterator[None]:
    """Both workers stop taking tasks, as when both are busy: runs queued meanwhile wait in
    the broker, their messages sent, until the workers take the queues again."""
    from portal.celery import app

    queues = WORK_QUEUES.split(",")
    for queue in queues:
        replies = app.control.cancel_consumer(queue, destination=portal.workers, reply=True, timeout=5)
        assert replies is not None
        assert len(replies) == len(portal.workers), replies
    try:
        yield
    finally:
        for queue in queues:
            app.control.add_consumer(queue, destination=portal.workers, reply=True, timeout=5)


def errors_logged(portal: Portal, marks: list[int]) -> list[str]:
    """Lines of the workers' logs since `marks` that report an error."""
    return [line for line in portal.since(marks).splitlines() if "ERROR/" in line or "Traceback" in line]


def new_collection(api: requests.Session, portal: Portal, name: str) -> int:
    response = api.post(f"{portal.url}/api/collections/", json={"name": name}, timeout=30)
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


def upload(api: requests.Session, portal: Portal, collection: int, files: list[tuple[str, bytes]]) -> list[dict]:
    """Every file in one multipart request (the API takes many at once)."""
    sent = [("files", (name, data)) for name, data in files]
    response = api.post(f"{portal.url}/api/collections/{collection}/documents/", files=sent, timeout=60)
    assert response.status_code == 201, response.text
    results: list[dict[str, Any]] = response.json()
    assert [result["name"] for result in results] == [name for name, _data in files]
    return results


def batch(label: str, colour: int) -> list[tuple[str, bytes]]:
    """Six two-line Markdown notes and a small picture, each unlike any other batch's."""
    notes = [
        (f"note-{n}.md", f"# {label}, note {n}\n\nRoom {n} of {label} is booked on day {n}.\n".encode())
        for n in range(1, 7)
    ]
    return [*notes, ("logo.png", png(64, 48, (colour % 256, 80, 160)))]


def settled(collections: list[int], bound: float) -> dict[int, tuple[str, str]]:
    """Each document of the collections as (status, error) once none of their runs is queued
    or running. Fails after `bound` seconds naming the documents still unfinished."""
    deadline = time.monotonic() + bound
    runs = IngestionRun.objects.filter(collection_id__in=collections)
    while runs.filter(status__in=ACTIVE_RUNS).exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"runs still unfinished after {bound:.0f} s: {unfinished(collections)}")
        time.sleep(0.2)
    # A run ends just after its document: their states are final now.
    documents = Document.objects.filter(collection_id__in=collections)
    return {pk: (status, error) for pk, status, error in documents.values_list("pk", "status", "error")}


def unfinished(collections: list[int]) -> list[tuple[Any, ...]]:
    """Documents not ready or failed, with each of their runs."""
    return described(Document.objects.filter(collection_id__in=collections, status__in=UNFINISHED))


def described(documents: QuerySet[Document]) -> list[tuple[Any, ...]]:
    """Each document with its runs: what a failure message needs to be read alone."""
    fields = ("pk", "kind", "status", "progress", "started_at", "finished_at", "error")
    return [
        (document.pk, document.name, document.status, list(document.runs.order_by("pk").values_list(*fields)))
        for document in documents
    ]


def whole_in_active_version(collection: int) -> set[int]:
    """The documents complete in the collection's active version (as the search sees it)."""
    active = Collection.objects.get(pk=collection).active_version_id
    return set(IndexedDocument.objects.filter(index_version_id=active).values_list("document_id", flat=True))


def assert_nothing_stuck(documents: dict[int, tuple[str, str]], collections: list[int]) -> None:
    stuck = [pk for pk, (status, _error) in documents.items() if status not in ("ready", "failed")]
    assert not stuck, f"left unfinished in collections {collections}: {unfinished(collections)}"
    silent = [pk for pk, (status, error) in documents.items() if status == "failed" and not error.strip()]
    assert not silent, f"failed without a reason: {silent}"


def test_files_uploaded_at_once_into_new_collections_all_end_ready(portal, api):
    """At least 20 rounds, each a new collection whose first seven files both workers take at
    once, while no index version exists yet."""
    marks = portal.marks()
    for number in range(1, ROUNDS + 1):
        collection = new_collection(api, portal, f"Round {number}")
        results = upload(api, portal, collection, batch(f"round {number}", number * 11))
        assert all(result["document"] and not result["error"] for result in results), results
        documents = settled([collection], ROUND_SECONDS)
        assert_nothing_stuck(documents, [collection])
        assert set(documents) == {result["document"] for result in results}
        failed = Document.objects.filter(pk__in=documents).exclude(status=Document.Status.READY)
        assert not failed.exists(), f"round {number}: {described(failed)}"
        assert whole_in_active_version(collection) == set(documents), f"round {number}"
        assert IndexVersion.objects.filter(collection_id=collection).count() == 1  # one first version, made once
    assert all(portal.took(marks)), portal.took(marks)  # both workers took a share


def reindex_with_uploads(api: requests.Session, portal: Portal, label: str, *, first_settled: bool) -> None:
    """A new collection's batch (indexed first, or still waiting), a reindex, and a second
    batch uploaded while it builds: the build completes and flips, and every document ends
    ready and whole in the version now active, its statistics as counted from its chunks."""
    collection = new_collection(api, portal, label)
    first = upload(api, portal, collection, batch(label, len(label) * 13))
    if first_settled:
        assert_nothing_stuck(settled([collection], ROUND_SECONDS), [collection])
    response = api.post(f"{portal.url}/api/collections/{collection}/reindex/", timeout=30)
    assert response.status_code == 200, response.text
    built = response.json()["id"]
    second = upload(api, portal, collection, [(f"late-{name}", data) for name, data in batch(f"late {label}", 3)])
    documents = settled([collection], 2 * ROUND_SECONDS)
    assert_nothing_stuck(documents, [collection])
    assert set(documents) == {result["document"] for result in [*first, *second]}
    failed = Document.objects.filter(pk__in=documents).exclude(status=Document.Status.READY)
    assert not failed.exists(), f"{label}: {described(failed)}"
    versions = dict(IndexVersion.objects.filter(collection_id=collection).values_list("pk", "status"))
    assert Collection.objects.get(pk=collection).active_version_id == built, f"{label}: {versions}"
    assert IndexVersion.Status.BUILDING not in versions.values(), f"{label}: {versions}"
    assert whole_in_active_version(collection) == set(documents), label
    kept, counted = kept_statistics(built), recounted(built)
    assert kept[:2] == counted[:2], f"{label}: {described(Document.objects.filter(pk__in=documents))}"
    assert kept == counted, label


def test_files_uploaded_during_a_reindex_all_end_ready_in_the_new_version(portal, api):
    for number in range(1, 4):
        reindex_with_uploads(api, portal, f"Reindexed {number}", first_settled=True)


def test_a_reindex_started_while_the_first_files_wait_ends_ready(portal, api):
    for number in range(1, 4):
        reindex_with_uploads(api, portal, f"Reindexed at once {number}", first_settled=False)


def test_a_document_deleted_while_its_run_is_queued_leaves_nothing_behind(portal, api):
    collection = new_collection(api, portal, "Deleted document")
    marks = portal.marks()
    with paused(portal):
        results = upload(api, portal, collection, batch("deleted document", 3))
        doomed, run = results[0]["document"], results[0]["run"]
        assert IngestionRun.objects.get(pk=run).status == IngestionRun.Status.QUEUED
        stored = Document.objects.get(pk=doomed).file.name
        assert (portal.media / stored).exists()
        assert api.delete(f"{portal.url}/api/documents/{doomed}/", timeout=30).status_code == 204
    documents = settled([collection], ROUND_SECONDS)
    wait_for(portal.idle, 60, "every task taken to end", portal.logs[0])  # the deleted run's too

    assert_nothing_stuck(documents, [collection])
    assert set(documents) == {result["document"] for result in results[1:]}
    assert {status for status, _error in documents.values()} == {"ready"}
    assert api.get(f"{portal.url}/api/documents/{doomed}/", timeout=30).status_code == 404
    assert not IngestionRun.objects.filter(pk=run).exists()
    assert not Page.objects.filter(document_id=doomed).exists()
    assert not (portal.media / stored).exists()
    assert errors_logged(portal, marks) == []


def test_a_collection_deleted_while_its_documents_run_leaves_nothing_behind(portal, api):
    collection = new_collection(api, portal, "Deleted collection")
    marks = portal.marks()
    manuals = [(f"manual-{n}.pdf", long_pdf(40)) for n in (1, 2)]
    results = upload(api, portal, collection, [*manuals, *batch("deleted collection", 5)])
    runs = IngestionRun.objects.filter(collection_id=collection, status=IngestionRun.Status.RUNNING)
    wait_for(lambda: runs.filter(progress__gte=2).exists(), 120, "a manual half-way", portal.logs[0])
    deleted = api.delete(f"{portal.url}/api/collections/{collection}/", timeout=30)
    # Sent again until it holds (a delete that failed left the collection): the workers are
    # idle, and the collection gone, before the test says what went wrong.
    wait_for(
        lambda: api.delete(f"{portal.url}/api/collections/{collection}/", timeout=30).status_code == 404,
        60,
        "the collection deleted",
    )
    wait_for(portal.idle, 120, "the workers to let go of the collection", portal.logs[0])

    assert deleted.status_code == 204, deleted.text
    documents = [result["document"] for result in results]
    assert not Document.objects.filter(pk__in=documents).exists()
    assert not IngestionRun.objects.filter(collection_id=collection).exists()
    assert not IndexVersion.objects.filter(collection_id=collection).exists()
    assert not Page.objects.filter(document_id__in=documents).exists()
    assert not Chunk.objects.filter(document_id__in=documents).exists()
    left = [str(path) for path in (portal.media / "collections" / str(collection)).rglob("*") if path.is_file()]
    assert left == [], "stored files left behind"
    assert errors_logged(portal, marks) == []


def test_bad_files_end_failed_with_a_reason_and_the_rest_of_the_upload_is_indexed(portal, api):
    """An empty file is refused at once; a PDF that its parser cannot read and a file whose
    original left the storage while its run waited fail with a message a person can act on;
    the good files of the same upload are indexed."""
    collection = new_collection(api, portal, "Bad input")
    good = batch("bad input", 17)[:3]
    files = [
        ("empty.md", b""),
        ("corrupt.pdf", (BAD / "corrupt.pdf").read_bytes()),
        ("gone.md", b"# Gone\n\nThis file leaves the storage before its run starts.\n"),
        *good,
    ]
    with paused(portal):
        results = {result["name"]: result for result in upload(api, portal, collection, files)}
        gone = Document.objects.get(pk=results["gone.md"]["document"])
        assert IngestionRun.objects.get(pk=results["gone.md"]["run"]).status == IngestionRun.Status.QUEUED
        (portal.media / gone.file.name).unlink()
    documents = settled([collection], ROUND_SECONDS)
    assert_nothing_stuck(documents, [collection])

    assert results["empty.md"]["document"] is None
    assert "The file is empty" in results["empty.md"]["error"]
    expected = {"corrupt.pdf": "PDF", "gone.md": "The stored file of this document is missing; upload it again."}
    for name, says in expected.items():
        body = api.get(f"{portal.url}/api/documents/{results[name]['document']}/", timeout=30).json()
        assert body["status"] == "failed", (name, body)
        assert says in body["error"], (name, body["error"])
        assert not UNREADABLE.search(body["error"]), (name, body["error"])
    for name, _data in good:
        assert documents[results[name]["document"]] == ("ready", ""), name
