"""`/metrics`: the portal's metrics in Prometheus' text format, for a monitoring system.

Built on prometheus-client, the Prometheus project's own library. django-prometheus was
weighed: it adds per-view middleware and database and cache metrics, but only by replacing
the database and cache backends the settings choose, knows nothing of Celery, Channels,
models or answers (all of which need code here anyway), and serves its metrics without
any access rule; the one middleware it would save is a few lines (operations.instrumentation).

Three scopes of value (docs/metrics.md lists each metric's):

- per process, added up per machine: what the processes count as they work
  (common.metrics), written to files in PORTAL_METRICS_DIR and summed here at each scrape
  (prometheus_client's multiprocess mode); the web, workers and beat of one machine share
  that folder, so any web process of a machine shows the whole machine;
- cluster-wide, read at scrape time: Celery's queue lengths (Redis) and the background
  runs queued and running, with the pace of running ingestions (PostgreSQL). Every web
  process shows the same values: query them with max(), not sum(), across instances;
- whether those two sources answered (portal_metrics_source_up), so that a scrape during a
  Redis or database outage still answers, with what it has.

Access: a request with `Authorization: Bearer <PORTAL_METRICS_TOKEN>`, or one straight from
an address in PORTAL_METRICS_ALLOWED_ADDRESSES. A request relayed by a proxy (it carries
X-Forwarded-For, Forwarded or X-Real-IP) needs the token, since the address the portal sees
is then the proxy's. Anyone else gets a 403 and nothing of the metrics; no login is needed.
"""

from __future__ import annotations

import contextlib
import glob
import hmac
import ipaddress
import logging
import os
from collections.abc import Callable, Iterator
from functools import cache

import psutil
import redis
from django.apps import apps
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import DatabaseError
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_safe
from prometheus_client import CollectorRegistry, multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from common import metrics as counted
from common.runs import Run
from ingestion.models import IngestionRun

log = logging.getLogger(__name__)

# Celery's queues (portal/celery.py routes the tasks to them; portal/supervisor.py names
# those a worker takes): kept in step by tests/operations/test_metrics.py.
QUEUES = ("ingest", "quick", "default", "memory", "evaluation")
# kombu's Redis transport keeps a queue's messages of priority p > 0 in a list of their own.
PRIORITY_SEPARATOR, PRIORITIES = "\x06\x16", (3, 6, 9)
RELAY_HEADERS = ("X-Forwarded-For", "Forwarded", "X-Real-IP")


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not allowed(request):
        raise PermissionDenied
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encoder(scrape_registry()), content_type=content_type)


def allowed(request: HttpRequest) -> bool:
    """The metrics token, or an allowed address that no proxy stands for."""
    token = settings.METRICS_TOKEN
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if token and scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
        return True
    if any(header in request.headers for header in RELAY_HEADERS):
        return False
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR") or "")
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # a server listening on :: sees IPv4 clients so
    return any(address in network for network in settings.METRICS_ALLOWED_NETWORKS)


def scrape_registry() -> CollectorRegistry:
    """The machine's processes' values (their files) and the cluster's, read now."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or str(settings.METRICS_DIR)
    os.makedirs(folder, exist_ok=True)  # `manage.py up` empties it; the first value makes files
    forget_dead_processes(folder)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=folder)
    registry.register(ClusterCollector())
    return registry


def forget_dead_processes(folder: str) -> None:
    """Drop the live gauges (websockets open) of this machine's processes that are gone, e.g.
    a web killed with its sockets open; their counters stay, and keep counting in the sums."""
    for path in glob.glob(os.path.join(folder, "gauge_live*_*.db")):
        identifier = os.path.basename(path)[: -len(".db")].split("_", 2)[2]
        host, pid = counted.host_of(identifier)
        if host == counted.this_host() and pid is not None and not psutil.pid_exists(pid):
            with contextlib.suppress(FileNotFoundError):  # another web process's scrape was first
                multiprocess.mark_process_dead(identifier, folder)


class ClusterCollector(Collector):
    """Values that already live in Redis and PostgreSQL, the same seen from any process."""

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "portal_metrics_source_up",
            "Whether a cluster-wide source answered this scrape (1) or not (0): redis, database.",
            labels=["source"],
        )
        yield from self._guarded(up, "redis", self._queues)
        yield from self._guarded(up, "database", self._runs)
        yield up

    @staticmethod
    def _guarded(up: GaugeMetricFamily, source: str, read: Callable[[], list[Metric]]) -> Iterator[Metric]:
        try:
            families = read()
        except (redis.RedisError, DatabaseError, OSError) as exc:
            log.warning("Metrics: %s unreadable: %s", source, exc)
            up.add_metric([source], 0)
            return
        up.add_metric([source], 1)
        yield from families

    @staticmethod
    def _queues() -> list[Metric]:
        family = GaugeMetricFamily(
            "portal_celery_queue_length", "Tasks waiting in each Celery queue (in Redis).", labels=["queue"]
        )
        pipe = broker().pipeline(transaction=False)
        for queue in QUEUES:
            for key in (queue, *(f"{queue}{PRIORITY_SEPARATOR}{p}" for p in PRIORITIES)):
                pipe.llen(key)
        lengths = pipe.execute()
        per_queue = len(PRIORITIES) + 1
        for index, queue in enumerate(QUEUES):
            family.add_metric([queue], sum(lengths[index * per_queue : (index + 1) * per_queue]))
        return [family]

    @staticmethod
    def _runs() -> list[Metric]:
        runs = GaugeMetricFamily(
            "portal_runs",
            "Background runs queued or running now, by kind (ingestion, sync, evaluation) and status.",
            labels=["kind", "status"],
        )
        active = (Run.Status.QUEUED, Run.Status.RUNNING)
        for model in run_models():
            kind = model._meta.model_name.removesuffix("run")  # type: ignore[union-attr]
            counts = dict(
                model._default_manager.filter(status__in=active)
                .values_list("status")
                .annotate(n=Count("pk"))
                .order_by()
            )
            for status in active:
                runs.add_metric([kind, status], counts.get(status, 0))
        pace = GaugeMetricFamily(
            "portal_ingestion_running_pages_per_second",
            "Pages a second of the ingestion runs running now (each run's pages done over its time "
            "so far, as the upload page shows it), added up.",
        )
        pace.add_metric([], running_pace())
        return [runs, pace]


def run_models() -> list[type[Run]]:
    """Every kind of background run (common.runs.Run), whichever app defines it."""
    return sorted((m for m in apps.get_models() if issubclass(m, Run)), key=lambda m: m._meta.label)


def running_pace() -> float:
    now = timezone.now()
    running = IngestionRun.objects.filter(status=Run.Status.RUNNING, started_at__isnull=False, progress__gt=0)
    total = 0.0
    for progress, started in running.values_list("progress", "started_at"):
        elapsed = (now - started).total_seconds() if started else 0.0
        if elapsed > 0:
            total += progress / elapsed
    return round(total, 3)


@cache
def broker() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=3, socket_connect_timeout=3)
