"""Evaluating index versions on golden questions (issue 22), with a real Celery worker on the
`evaluation` queue, the local models, PostgreSQL and Redis. Prints the figures and writes
bench/results/evaluation.json.

    .venv/bin/python bench/evaluation.py              # the corpus is indexed the first time (long)
    .venv/bin/python bench/evaluation.py --gate       # also a reindex with tiny chunks, gated

1. The corpus: the public evaluation's files (eval/files, real documents from Debian and PyPI
   packages: eval/manifest-*.jsonl) that its first --questions answerable questions need
   (pictures included; files of at most 60 pages), indexed once into the collection "bench-evaluation" of the user
   bench-evaluation@example.com (kept between runs). Those questions become the collection's
   golden questions.
2. A retrieval-only evaluation of the active version, queued as the Evaluations page queues
   it and run by the worker: the run's own seconds (target: 100 questions in at most 30 s on
   2 cores), the time from queueing to done, and hit@1/hit@5/MRR by language and kind.
3. With --gate: the collection's chunks set to --tiny characters and a reindex built here;
   the built version is evaluated by the worker against the active one and flipped or held
   back (the gate). Then the chunking is set back and the held version's successor built the
   same way. Reports each gate run's drops and decision.

The machine is shared: the figures are those of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common.runs import claim

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("MEM0_TELEMETRY", "False")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.test import override_settings  # noqa: E402

from ingestion import pipeline  # noqa: E402
from ingestion.models import IngestionRun  # noqa: E402
from ingestion.runs import new_ingest_run  # noqa: E402
from ingestion.versions import start_reindex  # noqa: E402
from knowledge import actions  # noqa: E402
from knowledge.models import Collection, Document, IndexVersion  # noqa: E402
from portal.supervisor import EVALUATION_QUEUE, worker_command  # noqa: E402
from providers import registry  # noqa: E402
from quality.actions import do_start_evaluation  # noqa: E402
from quality.models import EvaluationRun, GoldenQuestion  # noqa: E402
from sources.actions import do_folder_source, do_sync_here  # noqa: E402
from tests.stack import process, wait_for  # noqa: E402

EMAIL = "bench-evaluation@example.com"
NAME = "bench-evaluation"
TARGET_SECONDS = 30.0
MAX_PAGES = 60
OUT = ROOT / "bench" / "results" / "evaluation.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=100, help="Golden questions (default 100).")
    parser.add_argument("--gate", action="store_true", help="Also build a version with tiny chunks, gated.")
    parser.add_argument("--tiny", type=int, default=60, help="The tiny chunk size for --gate (default 60).")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    lines = picked(args.questions)
    collection = corpus(lines)
    golden(collection, lines)
    report: dict[str, Any] = {"questions": len(lines), "collection": collection.pk}
    with tempfile.TemporaryDirectory(prefix="bench-evaluation-") as folder:
        log = Path(folder) / "worker.log"
        with process(worker_command(f"bench-eval-{os.getpid()}@%h", 1, EVALUATION_QUEUE), log) as proc:
            wait_for(lambda: b"ready." in log.read_bytes() or proc.poll() is not None, 120, "worker start", log)
            collection.refresh_from_db()
            active = IndexVersion.objects.get(pk=collection.active_version_id or 0)
            report["retrieval"] = timed_run(collection, active)
            print_run("Retrieval only, active version", report["retrieval"])
            if args.gate:
                report["gate"] = gate(collection, args.tiny)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
    print(f"Wrote {args.out}")


def picked(count: int) -> list[dict[str, Any]]:
    """The first `count` answerable questions of the public evaluation whose files are here
    and have at most MAX_PAGES pages (eval/manifest-*.jsonl): indexing the 311-page gnuplot
    manual alone takes most of an hour on 2 cores, and the evaluation's cost is per question."""
    here = {path.name: path for path in (ROOT / "eval" / "files").rglob("*") if path.is_file()}
    pages = {}
    for manifest in sorted((ROOT / "eval").glob("manifest-*.jsonl")):
        for raw in manifest.read_text(encoding="utf-8").splitlines():
            entry = json.loads(raw)
            pages[entry["file"]] = entry.get("pages") or 0
    found = []
    for raw in (ROOT / "eval" / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        line = json.loads(raw)
        files = [g["file"] for g in line["gold"]]
        if line["type"] == "unanswerable" or not all(f in here and pages.get(f, 0) <= MAX_PAGES for f in files):
            continue
        found.append(line)
    return found[:count]


def corpus(lines: list[dict[str, Any]]) -> Collection:
    """The bench's collection with every file the questions need, indexed here the first time."""
    user = get_user_model().objects.filter(email=EMAIL).first()
    if user is None:
        user = get_user_model().objects.create_user(username=NAME, email=EMAIL, password=None)
    collection = Collection.objects.filter(owner_user=user, name=NAME).first() or actions.do_create_collection(
        user, NAME
    )
    wanted = {g["file"] for line in lines for g in line["gold"]}
    here = {path.name: path for path in (ROOT / "eval" / "files").rglob("*") if path.is_file()}
    with tempfile.TemporaryDirectory(prefix="bench-corpus-") as folder:
        for name in sorted(wanted):
            shutil.copy2(here[name], Path(folder) / name)
        started = time.perf_counter()
        with override_settings(SOURCE_ROOTS=[*settings.SOURCE_ROOTS, folder]):
            synced = do_sync_here(do_folder_source(collection, folder))
        # A document whose indexing an earlier run of this bench left unfinished: again, here.
        unfinished = Document.objects.filter(collection=collection, name__in=wanted)
        for document in unfinished.exclude(status=Document.Status.READY):
            run = new_ingest_run(document, enqueue=False)
            if claim(run):
                pipeline.ingest_document(run, registry.text_embedder())
        print(f"Corpus: {len(wanted)} files, {synced.counts or synced.error} in {time.perf_counter() - started:.0f} s")
    return collection


def golden(collection: Collection, lines: list[dict[str, Any]]) -> None:
    GoldenQuestion.objects.filter(collection=collection).delete()
    GoldenQuestion.objects.bulk_create(
        GoldenQuestion(
            collection=collection,
            key=line["id"],
            question=line["question"],
            lang=line["lang"],
            kind=line["type"],
            gold=line["gold"],
            keys=line.get("keys", []),
            history=line.get("history", []),
        )
        for line in lines
    )


def wait(run: EvaluationRun, timeout: float = 1800) -> EvaluationRun:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.status in (EvaluationRun.Status.SUCCEEDED, EvaluationRun.Status.FAILED) and (
            run.purpose != EvaluationRun.Purpose.GATE or run.decision or run.status == EvaluationRun.Status.FAILED
        ):
            return run
        time.sleep(0.2)
    raise SystemExit(f"evaluation run {run.pk} did not finish in {timeout} s")


def timed_run(collection: Collection, version: IndexVersion) -> dict[str, Any]:
    queued = time.perf_counter()
    run = wait(do_start_evaluation(collection, version))
    return {
        "status": run.status,
        "error": run.error,
        "questions": run.total,
        "run_seconds": run.seconds,
        "queued_to_done_seconds": round(time.perf_counter() - queued, 2),
        "mean_search_ms": run.summary.get("mean_ms"),
        "target_seconds": TARGET_SECONDS,
        "summary": run.summary.get("version"),
    }


def print_run(title: str, row: dict[str, Any]) -> None:
    overall = (row.get("summary") or {}).get("overall", {})
    print(
        f"{title}: {row['questions']} questions, run {row['run_seconds']} s "
        f"(queued to done {row['queued_to_done_seconds']} s; target <= {TARGET_SECONDS:.0f} s), "
        f"mean search {row['mean_search_ms']} ms; hit@1 {overall.get('hit@1', 0):.3f} "
        f"hit@5 {overall.get('hit@5', 0):.3f} MRR {overall.get('mrr', 0):.3f}"
    )
    summary = row.get("summary") or {}
    for key in ("by_lang", "by_type"):
        for label, values in summary.get(key, {}).items():
            print(f"  {label:<10} n={int(values['n']):>3} hit@1 {values['hit@1']:.3f} hit@5 {values['hit@5']:.3f} "
                  f"MRR {values['mrr']:.3f}")  # fmt: skip


def build_here(collection: Collection) -> IndexVersion:
    """A reindex whose runs are done in this process; its end calls the gate, which queues
    the evaluation for the worker."""
    version = start_reindex(collection, registry.text_embedder(), enqueue=False)
    started = time.perf_counter()
    for run in IngestionRun.objects.filter(index_version=version).order_by("pk"):
        if claim(run):
            pipeline.ingest_document(run, registry.text_embedder())
    print(f"Built v{version.number} with {version.config} in {time.perf_counter() - started:.0f} s")
    return version


def gate(collection: Collection, tiny: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    original = dict(collection.settings or {})
    for label, chunk_settings in (
        ("tiny chunks", {"chunk_size": tiny, "chunk_overlap": 0}),
        ("as before", original),
    ):
        collection.settings = {**original, **chunk_settings}
        collection.save(update_fields=["settings"])
        version = build_here(collection)
        run = EvaluationRun.objects.filter(version=version, purpose=EvaluationRun.Purpose.GATE).first()
        if run is None:
            rows.append({"label": label, "decision": "no gate run"})
            continue
        run = wait(run)
        version.refresh_from_db()
        rows.append(
            {
                "label": label,
                "version": version.number,
                "config": version.config,
                "drops": run.drops,
                "decision": run.decision,
                "status_after": version.status,
                "run_seconds": run.seconds,
                "summary": run.summary.get("version", {}).get("overall"),
                "baseline": run.summary.get("baseline", {}).get("overall"),
            }
        )
        print(f"Gate, {label}: v{version.number} drops {run.drops} -> {run.decision} ({run.seconds} s)")
    collection.settings = original
    collection.save(update_fields=["settings"])
    return rows


if __name__ == "__main__":
    main()
