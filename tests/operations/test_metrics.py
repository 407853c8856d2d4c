"""/metrics: who may scrape it (the token, or an allowed address no proxy stands for), that
its text is Prometheus' format, and that its values move with the work: requests, tasks,
websockets, model calls, queue lengths and runs in this process, then an upload read by a
real Celery worker and a question answered by a real daphne, both shown by that daphne."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import websockets
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import connections
from django.http import HttpResponse
from django.test import Client, RequestFactory
from prometheus_client import multiprocess, values
from prometheus_client.parser import text_string_to_metric_families

from common import metrics as counted
from common.runs import Run
from ingestion.actions import do_add_document
from ingestion.models import IngestionRun
from knowledge import actions
from operations import metrics
from operations.instrumentation import RequestMetrics, asgi_requests
from portal.celery import app
from portal.routing import websocket_urlpatterns
from portal.supervisor import EVALUATION_QUEUE, MEMORY_QUEUE, QUICK_QUEUE, WORK_QUEUES
from portal.tasks import heartbeat
from providers import registry
from providers.base import ChatMessage, ChatResult, ProviderError
from providers.metering import metered
from tests.portal.test_settings import _settings_error
from tests.stack import evidence_web, free_port, wait_for

pytestmark = pytest.mark.usefixtures("media")
OUTSIDE = "203.0.113.9"  # TEST-NET-3: never an allowed address
TOKEN = "s3cret-metrics-token-0123456789"


def value(text: str, sample: str, **labels: str) -> float:
    """A sample's value in a scrape (0 when it has none yet: nothing counted)."""
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == sample and all(found.labels.get(k) == v for k, v in labels.items()):
                return float(found.value)
    return 0.0


def moved(before: str, after: str, sample: str, **labels: str) -> float:
    """How much a sample moved between two scrapes."""
    return value(after, sample, **labels) - value(before, sample, **labels)


def scrape(client, **extra: str) -> str:
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.status_code
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return response.content.decode()


# Who may scrape


@pytest.mark.django_db
def test_it_refuses_anonymous_scrapes_from_other_addresses(client, alice):
    refused = client.get("/metrics", REMOTE_ADDR=OUTSIDE)
    assert refused.status_code == 403
    assert b"portal_" not in refused.content
    client.force_login(alice)  # a login is no way in either
    assert client.get("/metrics", REMOTE_ADDR=OUTSIDE).status_code == 403


@pytest.mark.django_db
def test_the_token_opens_it_from_anywhere(client, settings):
    settings.METRICS_TOKEN = TOKEN
    text = scrape(client, REMOTE_ADDR=OUTSIDE, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert "# TYPE portal_celery_queue_length gauge" in text
    for wrong in (f"Bearer {TOKEN}x", f"Token {TOKEN}", "Bearer", "Bearer ", f"Bearer {TOKEN[:-1]}é", TOKEN):
        assert client.get("/metrics", REMOTE_ADDR=OUTSIDE, HTTP_AUTHORIZATION=wrong).status_code == 403, wrong
    settings.METRICS_TOKEN = ""  # no token set: a bearer of nothing opens nothing
    assert client.get("/metrics", REMOTE_ADDR=OUTSIDE, HTTP_AUTHORIZATION="Bearer ").status_code == 403


@pytest.mark.django_db
def test_allowed_addresses_need_no_token(client, settings):
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::ffff:127.0.0.1").status_code == 200  # daphne on ::
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.2").status_code == 403  # 127.0.0.1/32 only
    settings.METRICS_ALLOWED_NETWORKS = [ipaddress.ip_network("10.0.0.0/8")]
    assert client.get("/metrics", REMOTE_ADDR="10.20.30.40").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403
    for junk in ("", "not-an-address", "10.0.0.1:5000"):
        assert client.get("/metrics", REMOTE_ADDR=junk).status_code == 403, junk


@pytest.mark.django_db
def test_a_request_through_a_proxy_needs_the_token(client, settings):
    """A proxy on the machine makes every client's address 127.0.0.1: its header gives it away."""
    settings.METRICS_TOKEN = TOKEN
    for header in ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP"):
        relayed = {"REMOTE_ADDR": "127.0.0.1", header: OUTSIDE}
        assert client.get("/metrics", **relayed).status_code == 403, header
        scrape(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}", **relayed)


@pytest.mark.django_db
def test_it_only_reads(client):
    assert client.post("/metrics").status_code == 405
    assert client.head("/metrics").status_code == 200


def test_the_settings_refuse_a_bad_network_or_a_short_token():
    assert "PORTAL_METRICS_ALLOWED_ADDRESSES" in _settings_error(PORTAL_METRICS_ALLOWED_ADDRESSES="10.0.0.1/8")
    assert "PORTAL_METRICS_ALLOWED_ADDRESSES" in _settings_error(PORTAL_METRICS_ALLOWED_ADDRESSES="localhost")
    assert "PORTAL_METRICS_TOKEN" in _settings_error(PORTAL_METRICS_TOKEN="short")


# What it shows


@pytest.mark.django_db
def test_it_counts_requests_by_route_name_not_path(client, alice):
    before = scrape(client)
    client.get("/favicon.ico")
    client.get("/static/portal/favicon.svg")
    client.get("/no/such/page/12345")
    client.force_login(alice)
    client.get("/api/documents/987654/")  # a 404 of a route with an object id
    after = scrape(client)
    for view, status in (("favicon", "3xx"), ("static", "2xx"), ("none", "4xx"), ("document-detail", "4xx")):
        labels = {"view": view, "method": "GET", "status": status}
        assert moved(before, after, "portal_http_requests_total", **labels) == 1, labels
    assert "987654" not in after
    assert "/no/such/page" not in after


@pytest.mark.django_db
def test_a_server_error_is_an_error_of_its_view(client):
    def failing(request):
        request.resolver_match = type("Match", (), {"view_name": "test-failing"})()
        return HttpResponse(status=503)

    before = scrape(client)
    RequestMetrics(failing)(RequestFactory().post("/x"))
    after = scrape(client)
    assert moved(before, after, "portal_errors_total", kind="request", name="test-failing") == 1
    counted = {"view": "test-failing", "method": "POST"}
    assert moved(before, after, "portal_http_requests_total", status="5xx", **counted) == 1
    assert moved(before, after, "portal_http_request_duration_seconds_count", **counted) == 1


@pytest.mark.django_db
def test_an_asgi_app_outside_django_counts_as_one_view(client):
    """The MCP server's requests (portal/asgi.py): its status, or a 500 when it fails first."""

    async def answers(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def fails(scope, receive, send) -> None:
        raise RuntimeError("the app failed before answering")

    async def received() -> dict:
        return {"type": "http.request", "body": b""}

    async def sent(message) -> None:
        pass

    before = scrape(client)
    asyncio.run(asgi_requests(answers, "test-asgi")({"type": "http", "method": "POST"}, received, sent))
    with pytest.raises(RuntimeError):
        asyncio.run(asgi_requests(fails, "test-asgi")({"type": "http", "method": "GET"}, received, sent))
    after = scrape(client)
    assert moved(before, after, "portal_http_requests_total", view="test-asgi", method="POST", status="2xx") == 1
    assert moved(before, after, "portal_http_requests_total", view="test-asgi", method="GET", status="5xx") == 1
    assert moved(before, after, "portal_errors_total", kind="request", name="test-asgi") == 1


@pytest.mark.django_db
def test_it_shows_queue_lengths_and_runs_from_redis_and_the_database(client, alice, private_collection):
    broker = metrics.broker()
    key, high = "evaluation", "evaluation\x06\x163"  # a priority's list counts too
    before = scrape(client)
    try:
        broker.rpush(key, b"{}", b"{}")
        broker.rpush(high, b"{}")
        _document, run = do_add_document(private_collection, "queued.md", b"# A\n\ntext", enqueue=False)
        during = scrape(client)
    finally:
        broker.delete(key, high)
    assert moved(before, during, "portal_celery_queue_length", queue="evaluation") == 3
    assert moved(before, during, "portal_runs", kind="ingestion", status="queued") == 1
    assert run is not None
    IngestionRun.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, progress=30, started_at=run.created_at)
    running = scrape(client)
    assert moved(during, running, "portal_runs", kind="ingestion", status="running") == 1
    assert value(running, "portal_ingestion_running_pages_per_second") > 0
    kinds = {
        sample.labels["kind"]
        for family in text_string_to_metric_families(running)
        for sample in family.samples
        if family.name == "portal_runs"
    }
    assert {"ingestion", "sync", "evaluation"} <= kinds
    assert value(running, "portal_metrics_source_up", source="redis") == 1
    assert value(running, "portal_metrics_source_up", source="database") == 1


def test_the_queues_are_the_ones_workers_take():
    taken = {*WORK_QUEUES.split(","), QUICK_QUEUE, MEMORY_QUEUE, EVALUATION_QUEUE}
    routed = {route["queue"] for route in app.conf.task_routes.values()} | {app.conf.task_default_queue}
    assert set(metrics.QUEUES) == taken | routed


@pytest.mark.django_db
def test_a_scrape_during_a_redis_outage_still_answers(client, monkeypatch):
    import redis

    monkeypatch.setattr(metrics, "broker", lambda: redis.Redis(port=free_port(), socket_connect_timeout=1))
    text = scrape(client)
    assert value(text, "portal_metrics_source_up", source="redis") == 0
    assert value(text, "portal_metrics_source_up", source="database") == 1
    assert "portal_celery_queue_length{" not in text


@pytest.mark.django_db
def test_it_times_celery_tasks_by_name_and_state(client):
    def fails() -> None:
        raise RuntimeError("a task that fails")

    failing = app.task(name="tests.operations.fails")(fails)
    before = scrape(client)
    heartbeat.apply()
    failing.apply()
    after = scrape(client)
    assert moved(before, after, "portal_celery_tasks_total", task="portal.tasks.heartbeat", state="success") == 1
    assert moved(before, after, "portal_celery_task_duration_seconds_count", task="portal.tasks.heartbeat") == 1
    assert moved(before, after, "portal_celery_tasks_total", task="tests.operations.fails", state="failure") == 1
    assert moved(before, after, "portal_errors_total", kind="task", name="tests.operations.fails") == 1


@pytest.mark.django_db(transaction=True)
def test_it_counts_websockets_accepted_open_and_closed(client, alice):
    async def scenario() -> tuple[str, str, str]:
        anonymous = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/chat/")
        await anonymous.connect()
        assert (await anonymous.receive_output(5))["code"] == 4401
        await anonymous.disconnect()
        refused = await sync_to_async(scrape)(client)
        signed_in = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/chat/")
        signed_in.scope["user"] = alice
        connected, _ = await signed_in.connect()
        assert connected
        open_now = await sync_to_async(scrape)(client)
        await signed_in.disconnect()
        after = await sync_to_async(scrape)(client)
        await database_sync_to_async(connections.close_all)()  # the consumers' thread's connection
        return refused, open_now, after

    before = scrape(client)
    refused, open_now, after = asyncio.run(scenario())
    chat = {"consumer": "chat"}
    assert moved(before, refused, "portal_websocket_closes_total", code="4401", **chat) == 1
    assert moved(before, refused, "portal_websocket_connections_open", **chat) == 0
    assert moved(before, open_now, "portal_websocket_connections_total", **chat) == 2
    assert moved(before, open_now, "portal_websocket_connections_open", **chat) == 1
    assert moved(before, after, "portal_websocket_connections_open", **chat) == 0


class Scripted:
    """A chat model at the adapter boundary: what it answers, and a failure on demand."""

    model_id = "fake:chat"
    last_read = 0

    def complete(self, messages, *, json_mode=False, max_tokens=512, temperature=0.2) -> ChatResult:
        return ChatResult("yes", self.model_id, prompt_tokens=11, completion_tokens=2)

    def stream(self, messages, *, max_tokens=512, temperature=0.2) -> Iterator[str]:
        yield from ("a", "b", "c")

    def yes_minus_no(self, messages) -> float:
        self.last_read = 7
        return self.complete(messages).prompt_tokens / 100  # a call inside a call counts once

    def choice(self, messages, options):
        raise ProviderError("chat", "fake", "down")


@pytest.mark.django_db
def test_model_calls_are_counted_with_their_tokens(client):
    model = metered(Scripted(), "chat", "fake")
    assert isinstance(model, Scripted)
    before = scrape(client)
    model.complete([ChatMessage("user", "hi")])
    assert list(model.stream([ChatMessage("user", "hi")])) == ["a", "b", "c"]
    assert model.yes_minus_no([ChatMessage("user", "hi")]) == 0.11
    with pytest.raises(ProviderError):
        model.choice([], ["0", "1"])
    after = scrape(client)
    fake = {"role": "chat", "provider": "fake"}
    assert moved(before, after, "portal_model_calls_total", outcome="ok", **fake) == 3
    assert moved(before, after, "portal_model_calls_total", outcome="error", **fake) == 1
    assert moved(before, after, "portal_model_call_duration_seconds_count", **fake) == 4
    assert moved(before, after, "portal_model_tokens_total", kind="prompt", **fake) == 11 + 7
    assert moved(before, after, "portal_model_tokens_total", kind="completion", **fake) == 2 + 3
    assert moved(before, after, "portal_errors_total", kind="model", name="chat") == 1


def test_the_registry_meters_every_model_it_builds():
    embedder = registry.build(registry.role_config("embedding"))  # the local one: loaded on first use
    assert embedder.embed_query.__wrapped__.__self__ is embedder  # type: ignore[attr-defined]


@pytest.mark.django_db
def test_a_dead_web_processes_open_websockets_are_dropped(client):
    """A web killed with sockets open leaves its live gauge: dropped at the next scrape when
    the process was this machine's; another machine's (a shared volume) is not ours to judge."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    here, elsewhere = f"{counted.this_host()}-{gone.pid}", f"elsewhere.example-{gone.pid}"
    for identifier in (here, elsewhere):
        made = values.MultiProcessValue(process_identifier=lambda identifier=identifier: identifier)
        name = "portal_websocket_connections_open"
        made("gauge", name, name, ("consumer",), ("test-dead",), "", multiprocess_mode="livesum").set(3)
    try:
        assert value(scrape(client), "portal_websocket_connections_open", consumer="test-dead") == 3
        assert not list(counted_folder().glob(f"gauge_livesum_{here}.db"))
    finally:
        multiprocess.mark_process_dead(elsewhere, str(counted_folder()))


def counted_folder() -> Path:
    return Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])


def test_processes_write_under_their_host_and_pid():
    host, pid = counted.host_of(counted.process_id())
    assert (host, pid) == (counted.this_host(), os.getpid())
    assert "_" not in counted.process_id()


# The whole path: an upload read by a worker, a question answered by daphne, a websocket


@pytest.fixture
def web(tmp_path) -> Iterator[int]:
    """daphne answering from the evidence alone (no chat model needed)."""
    with evidence_web(tmp_path / "daphne.log") as port:
        yield port


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_the_counters_move_after_an_upload_and_a_question(web, live_worker, alice, private_collection):
    """The worker's pages and tasks and the web's answers reach one scrape of the web."""
    base = f"http://127.0.0.1:{web}"
    _token, key = actions.do_create_token(alice, "metrics test")
    auth = {"Authorization": f"Token {key}"}

    def scraped() -> str:
        response = httpx.get(f"{base}/metrics", timeout=30)
        assert response.status_code == 200
        return response.text

    before = scraped()
    upload = httpx.post(
        f"{base}/api/collections/{private_collection.pk}/documents/",
        files={"files": ("leave.md", b"# Leave\n\nEmployees get 25 days of paid annual leave per year.")},
        headers=auth,
        timeout=60,
    )
    assert upload.status_code == 201, upload.text
    document = upload.json()[0]["document"]

    def ready() -> bool:
        status = httpx.get(f"{base}/api/documents/{document}/", headers=auth, timeout=30).json()["status"]
        assert status != "failed"
        return status == "ready"

    wait_for(ready, 120, "the upload indexed", every=0.5)
    answer = httpx.post(
        f"{base}/api/ask/",
        json={"question": "How many days of paid annual leave per year?", "collections": [private_collection.pk]},
        headers=auth,
        timeout=120,
    ).json()
    assert "25" in answer["answer"], answer
    # The worker counts its task once the task has returned, just after the document is ready.
    task = {"task": "ingestion.ingest_document", "state": "success"}

    def task_counted() -> str | None:
        text = scraped()
        return text if moved(before, text, "portal_celery_tasks_total", **task) >= 1 else None

    after = wait_for(task_counted, 30, "the worker's task counted")
    assert moved(before, after, "portal_ingestion_pages_total", format="markdown") >= 1  # read by the worker
    assert moved(before, after, "portal_celery_task_duration_seconds_count", task="ingestion.ingest_document") >= 1
    assert moved(before, after, "portal_http_requests_total", view="ask", method="POST", status="2xx") == 1
    strategy = answer["strategy"]
    assert moved(before, after, "portal_answers_total", strategy=strategy, mode="evidence", outcome="answered") == 1
    assert moved(before, after, "portal_answer_stage_seconds_count", stage="total", strategy=strategy) == 1
    # the page's vectors (by the worker) and the question's (by daphne)
    assert moved(before, after, "portal_model_calls_total", role="embedding", outcome="ok") >= 2


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_a_real_websocket_is_open_while_connected(web, alice):
    session = Client()
    session.force_login(alice)
    headers = {"Cookie": f"sessionid={session.cookies['sessionid'].value}", "Origin": f"http://127.0.0.1:{web}"}

    def open_chats() -> float:
        text = httpx.get(f"http://127.0.0.1:{web}/metrics", timeout=30).text
        return value(text, "portal_websocket_connections_open", consumer="chat")

    before = open_chats()

    async def scenario() -> float:
        async with websockets.connect(f"ws://127.0.0.1:{web}/ws/chat/", additional_headers=headers) as socket:
            await socket.send(json.dumps({"type": "ping"}))
            assert json.loads(await asyncio.wait_for(socket.recv(), timeout=10)) == {"type": "pong"}
            return await asyncio.to_thread(open_chats)

    assert asyncio.run(scenario()) - before == 1
    wait_for(lambda: open_chats() == before, 10, "the socket counted closed")
