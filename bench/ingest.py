"""Ingestion speed, incremental cost and memory: prints figures, writes
bench/results/ingest.json and bench/results/ingest.png.

    DATABASE_URL=... .venv/bin/python bench/ingest.py     # about 3-5 minutes on 2 cores
    DATABASE_URL=... .venv/bin/python bench/ingest.py --storage s3   # text-PDF throughput,
        # local disk against an S3 store (a moto server it starts): bench/results/ingest-s3.json
    DATABASE_URL=... .venv/bin/python bench/ingest.py --layouts eval/files --pdf-pages 6
        # one worker with 2 model threads against two with 1: bench/results/ingest-layouts.json
    DATABASE_URL=... .venv/bin/python bench/ingest.py --first-page FILE.pdf [--to-end]
        # seconds from upload to its first page searchable: bench/results/ingest-first-page.json

Uses the configured database (run `manage.py migrate` first) in a collection of its own,
deleted at the end, and the configured embedder (local by default). Targets from issue 4:
pipeline >= 70% of embedder-only throughput; re-syncing 100 files with one changed <= 1.2x
ingesting that file alone; peak worker RSS on a 1,000-page PDF < 1.5 GB. Issue 24: with
files in an S3-compatible store, text-PDF throughput within 15 % of the local-disk figure.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
PARAGRAPH = (
    "Travel costs are reimbursed against receipts; hotels are capped by city tier. 差旅费用凭发票报销，"
    "住宿按城市等级限额。"
)


def setup() -> None:
    import django

    django.setup()


def make_pdf(pages: int, paragraphs: int) -> bytes:
    import pymupdf

    document = pymupdf.open()
    font = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")
    for number in range(1, pages + 1):
        page = document.new_page()
        text = f"Section {number}\n" + "\n\n".join(f"{n}. {PARAGRAPH}" for n in range(paragraphs))
        page.insert_textbox(
            pymupdf.Rect(60, 60, 540, 780),
            text,
            fontsize=10,
            fontname="cjk" if font.exists() else "helv",
            fontfile=str(font) if font.exists() else None,
        )
    data: bytes = document.tobytes()
    return data


def collection(name: str):  # type: ignore[no-untyped-def]
    from django.contrib.auth import get_user_model

    from knowledge import actions

    user, _ = get_user_model().objects.get_or_create(username="bench", defaults={"email": "bench@localhost"})
    return actions.do_create_collection(user, f"{name} {time.time():.0f}")


def ingest_inline(target, name: str, data: bytes) -> float:  # type: ignore[no-untyped-def]
    from common.runs import claim
    from ingestion.actions import do_add_document
    from ingestion.pipeline import ingest_document
    from providers import registry

    started = time.perf_counter()
    _document, run = do_add_document(target, name, data, enqueue=False)
    if run is not None:
        assert claim(run)
        ingest_document(run, registry.text_embedder())
        run.refresh_from_db()
        assert run.status == "succeeded", run.error
    return time.perf_counter() - started


def throughput(pages: int = 200) -> dict[str, float]:
    from knowledge.models import Chunk
    from providers import registry

    target = collection("bench throughput")
    registry.text_embedder().embed_query("warm up")
    seconds = ingest_inline(target, f"{pages}.pdf", make_pdf(pages, 3))
    chunks = list(Chunk.objects.filter(document__collection=target).order_by("page__number", "ordinal"))
    texts = [
        (" > ".join(c.location["heading_path"]) + "\n" + c.text) if c.location["heading_path"] else c.text
        for c in chunks
    ]
    by_page: dict[int, list[str]] = {}
    for chunk, text in zip(chunks, texts, strict=True):
        by_page.setdefault(chunk.page_id, []).append(text)
    started = time.perf_counter()
    for batch in by_page.values():  # the same batches the pipeline sends
        registry.text_embedder().embed_documents(batch)
    embed_only = time.perf_counter() - started
    target.delete()
    return {
        "pages": pages,
        "chunks": len(chunks),
        "pipeline_seconds": seconds,
        "embedder_only_seconds": embed_only,
        "pages_per_second": pages / seconds,
        "pipeline_vs_embedder": embed_only / seconds,
    }


def storage_throughput(pages: int) -> dict[str, float]:
    """Text-PDF pipeline throughput with the files on the local disk, then in an S3 bucket of
    a moto server started here (authentication enforced, on 127.0.0.1), in the same process:
    the original is uploaded to the bucket, parsed from a temporary copy, pictures written
    back. Local first, so that the S3 run finds every model already loaded."""
    from django.conf import settings
    from django.test import override_settings

    from common.storage import s3_options
    from tests.sources.servers import moto_s3_server

    throughput(1)  # first-use costs (imports, models, caches) out of both figures
    local = throughput(pages)
    with tempfile.TemporaryDirectory() as tmp, moto_s3_server(Path(tmp) / "moto.log") as server:
        bucket = "bench-files"
        server.make_bucket(bucket)
        options = s3_options(
            endpoint_url=server.endpoint_url,
            bucket=bucket,
            region=server.region,
            access_key=server.access_key,
            secret_key=server.secret_key,
            timeout=10,
        )
        s3_storage = {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options}
        with override_settings(STORAGES={**settings.STORAGES, "default": s3_storage}):  # resets default_storage
            s3 = throughput(pages)
    return {
        "pages": pages,
        "local_pipeline_seconds": local["pipeline_seconds"],
        "s3_pipeline_seconds": s3["pipeline_seconds"],
        "local_pages_per_second": local["pages_per_second"],
        "s3_pages_per_second": s3["pages_per_second"],
        "s3_vs_local": s3["pages_per_second"] / local["pages_per_second"],
    }


def resync() -> dict[str, float]:
    from django.core.management import call_command
    from django.test import override_settings

    target, alone = collection("bench folder"), collection("bench single")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for n in range(100):
            (folder / f"note-{n:03}.md").write_text(f"# Note {n}\n\n{PARAGRAPH * 3}", encoding="utf-8")
        with override_settings(SOURCE_ROOTS=[str(folder)]):  # the folder a source may sync
            call_command("ingest", str(folder), collection=target.pk, inline=True, stdout=io.StringIO())
            changed = folder / "note-042.md"
            changed.write_text(f"# Note 42, revised\n\n{PARAGRAPH * 4}", encoding="utf-8")
            started = time.perf_counter()
            call_command("ingest", str(folder), collection=target.pk, inline=True, stdout=io.StringIO())
            resync_seconds = time.perf_counter() - started
        ingest_inline(alone, "warm.md", b"# warm\n\nup")  # the same one-time costs on both sides
        single = ingest_inline(alone, "note-042.md", changed.read_bytes())
    target.delete()
    alone.delete()
    return {
        "files": 100,
        "resync_seconds": resync_seconds,
        "single_file_seconds": single,
        "resync_vs_single": resync_seconds / single,
    }


def formats() -> dict[str, float]:
    """Pages per second for each format on small real files (the test generators), with the
    local OCR and speech models where the format needs them; and OCR seconds per page."""
    from tests.ingestion import image_files, media_files, office_files, sheet_files

    target = collection("bench formats")
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        samples = {
            "pdf": ("text.pdf", make_pdf(20, 3)),
            "markdown": ("notes.md", "\n\n".join(f"# Note {n}\n\n{PARAGRAPH * 3}" for n in range(20)).encode()),
            "docx": ("handbook.docx", office_files.handbook_docx(folder / "h.docx").read_bytes()),
            "pptx": ("briefing.pptx", office_files.briefing_pptx(folder / "b.pptx").read_bytes()),
            "xlsx": ("long.xlsx", sheet_files.long_xlsx(folder / "l.xlsx", rows=1000).read_bytes()),
            "csv": ("long.csv", sheet_files.long_csv(folder / "l.csv", rows=1000).read_bytes()),
            "image_ocr": ("invoice.png", image_files.text_image(["Invoice 2024 total 350 yuan", "差旅费用凭发票报销"])),
            "scanned_pdf_ocr": (
                "scan.pdf",
                image_files.scanned_pdf(folder / "s.pdf", ["Reimbursement form", "报销单 2024年5月"] * 4).read_bytes(),
            ),
            "video_ocr_speech": ("talk.mp4", media_files.make_video(folder / "t.mp4", seconds=20).read_bytes()),
        }
        for label, (name, data) in samples.items():
            seconds = ingest_inline(target, name, data)
            from knowledge.models import Document

            pages = Document.objects.get(collection=target, rel_path=name).page_count
            results[f"{label}_pages"] = pages
            results[f"{label}_pages_per_s"] = pages / seconds
    from providers import registry

    page = image_files.scanned_pdf(Path(tempfile.mkdtemp()) / "o.pdf", ["Reimbursement form 报销单"] * 12)
    import pymupdf

    with pymupdf.open(page) as document:
        render = document.load_page(0).get_pixmap(dpi=200).tobytes("png")
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        registry.ocr().read(render)
        timings.append(time.perf_counter() - started)
    results["ocr_seconds_per_a4_page"] = sorted(timings)[1]
    target.delete()
    return results


FORMATS = {  # the stacked plot's groups, by file suffix
    ".pdf": "pdf",
    ".docx": "office",
    ".pptx": "office",
    ".xlsx": "sheet",
    ".csv": "sheet",
    ".md": "text",
    ".jpg": "picture",
    ".png": "picture",
    ".gif": "picture",
}


def sampled_pdf(path: Path, pages: int) -> bytes:
    """The PDF cut to `pages` pages spread evenly over it (its first, its last and between),
    so a manual's contents pages, body and index all count; the whole file when it is short."""
    import pymupdf

    with pymupdf.open(path) as document:
        total = document.page_count
        if pages <= 0 or total <= pages:
            return path.read_bytes()
        step = (total - 1) / (pages - 1) if pages > 1 else 0
        document.select(sorted({round(n * step) for n in range(pages)}))
        data: bytes = document.tobytes(garbage=3)
        return data


def profile_set(folder: Path, pages: int) -> dict[str, Any]:
    """Each file of the public evaluation (PDFs cut to `pages` pages) ingested inline, one after
    another, as a worker does: seconds per file and per unit, each run's time per stage
    (ingestion.stages), the slowest page, and the sums per format."""
    from ingestion.models import IngestionRun
    from providers import registry

    registry.text_embedder().embed_query("warm up")
    target = collection("bench profile")
    ingest_inline(target, "warm.md", b"# warm\n\nup")
    files: list[dict[str, Any]] = []
    for path in sorted(p for p in folder.rglob("*") if p.suffix.lower() in FORMATS):
        data = sampled_pdf(path, pages) if path.suffix.lower() == ".pdf" else path.read_bytes()
        seconds = ingest_inline(target, f"{path.parent.name}/{path.name}", data)
        run = IngestionRun.objects.filter(document__collection=target, document__rel_path__endswith=path.name).first()
        assert run is not None
        units = run.document.page_count if run.document else 0
        stages = getattr(run, "stages", {})  # absent before runs recorded them: a baseline's checkout
        slowest = stages.get("slowest_page") or [0, 0.0]
        files.append(
            {
                "file": f"{path.parent.name}/{path.name}",
                "format": FORMATS[path.suffix.lower()],
                "units": units,
                "seconds": round(seconds, 3),
                "per_unit": round(seconds / max(units, 1), 3),
                "slowest_page": slowest,
                "stages": stages.get("seconds", {}),
            }
        )
        print(
            f"{files[-1]['file']:<44} {units:>4} units {seconds:>8.1f} s {seconds / max(units, 1):>6.2f} s/unit"
            f"  slowest p.{slowest[0]} {slowest[1]:.1f} s",
            flush=True,
        )
    target.delete()
    by_format: dict[str, dict[str, float]] = {}
    for row in files:
        group = by_format.setdefault(row["format"], {"units": 0, "seconds": 0.0})
        group["units"] += row["units"]
        group["seconds"] += row["seconds"]
        for name, value in row["stages"].items():
            group[name] = group.get(name, 0.0) + value
    units = sum(row["units"] for row in files)
    total = sum(row["seconds"] for row in files)
    from bench.common import cpu

    return {
        "cpu": cpu(),
        "pages_per_pdf": pages,
        "files": files,
        "formats": by_format,
        "units": units,
        "seconds": round(total, 1),
        "slowest_page": max((row["slowest_page"] for row in files), key=lambda s: s[1]),
    }


def first_page(path: Path, to_end: bool) -> dict[str, Any]:
    """One long PDF uploaded and ingested as a worker does (in a thread of this process, the
    embedder already loaded), while this thread searches as its owner would, every 0.25 s,
    for the longest line of its first page with text (a cover is often a picture): seconds
    from the upload to the first time that page is among the hits, and (`to_end`) to the
    whole document ready; else the run is cancelled once the page is found."""
    import threading

    import pymupdf

    from assistant.retrieval.search import search
    from common.runs import claim
    from ingestion.actions import do_add_document, do_cancel_run
    from ingestion.pipeline import ingest_document
    from providers import registry

    with pymupdf.open(path) as pdf:
        pages = pdf.page_count
        number, text = next((n + 1, page.get_text()) for n, page in enumerate(pdf) if len(page.get_text()) >= 80)
    query = max(text.splitlines(), key=len)[:200]
    registry.text_embedder().embed_query("warm up")
    target = collection("bench first page")
    user = target.owner_user
    search(user, "warm up", k=5, rerank=False)
    started = time.perf_counter()
    document, run = do_add_document(target, path.name, path.read_bytes(), enqueue=False)
    assert run is not None

    def work() -> None:
        from django.db import connection

        assert claim(run)
        ingest_document(run, registry.text_embedder())
        connection.close()

    worker = threading.Thread(target=work)
    worker.start()
    found = None
    while worker.is_alive() and found is None:
        hits = search(user, query, k=10, rerank=False).hits
        if any(hit.document_id == document.pk and hit.page_number == number for hit in hits):
            found = time.perf_counter() - started
            print(f"page {number} of {path.name} found after {found:.1f} s", flush=True)
            if not to_end:
                do_cancel_run(run)
        else:
            time.sleep(0.25)
    worker.join()
    whole = time.perf_counter() - started
    run.refresh_from_db()
    print(f"run {run.status} after {whole:.1f} s ({run.progress} of {pages} pages)", flush=True)
    target.delete()
    from bench.common import cpu

    return {
        "cpu": cpu(),
        "file": path.name,
        "pages": pages,
        "page": number,
        "query": query,
        "first_page_searchable_s": round(found, 2) if found is not None else None,
        "run": run.status,
        "pages_done": run.progress,
        "seconds": round(whole, 1),
    }


def share(folder: Path, workers: int) -> list[list[Path]]:
    """The folder's files split into `workers` shares of about equal work, by each file's
    seconds in the last profile (bench/results/ingest-profile.json; by size where absent),
    largest first onto the least loaded share: what the ingest queue does with several
    workers taking one document each."""
    profiled = ROOT / "bench" / "results" / "ingest-profile.json"
    known: dict[str, float] = {}
    if profiled.exists():
        known = {row["file"]: row["seconds"] for row in json.loads(profiled.read_text())["set"]["files"]}
    paths = sorted(p for p in folder.rglob("*") if p.suffix.lower() in FORMATS)

    def cost(path: Path) -> float:
        return known.get(f"{path.parent.name}/{path.name}", path.stat().st_size / 100_000)

    shares: list[list[Path]] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for path in sorted(paths, key=cost, reverse=True):
        lightest = loads.index(min(loads))
        shares[lightest].append(path)
        loads[lightest] += cost(path)
    return shares


def layouts(folder: Path, pages: int, tried: list[tuple[int, int]]) -> dict[str, Any]:
    """The same files ingested by W worker processes with T model threads each (W x T = the
    machine's cores): wall seconds from the moment every worker is loaded and ready to the
    last file done, and each worker's peak memory. The cache of pictures' OCR and descriptions
    is emptied before each layout, so that neither finds the other's work."""
    from ingestion.models import DerivedText

    results: dict[str, Any] = {}
    for workers, threads in tried:
        DerivedText.objects.all().delete()
        target = collection(f"bench layout {workers}x{threads}")
        children = []
        for files in share(folder, workers):
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as listing:
                json.dump({"collection": target.pk, "pages": pages, "files": [str(p) for p in files]}, listing)
            children.append(
                subprocess.Popen(
                    [sys.executable, __file__, "--child-share", listing.name],
                    env={**os.environ, "PORTAL_MODEL_THREADS": str(threads)},
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        for child in children:  # each has loaded its models and ingested a warm-up file
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
        started = time.perf_counter()
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.close()
        reports = []
        for child in children:
            assert child.stdout is not None
            reports.append(json.loads(child.stdout.read()))
            child.wait()
        wall = time.perf_counter() - started
        units = sum(report["units"] for report in reports)
        results[f"{workers}x{threads}"] = {
            "workers": workers,
            "threads": threads,
            "seconds": round(wall, 1),
            "units": units,
            "units_per_second": round(units / wall, 3),
            "busy_seconds": [report["seconds"] for report in reports],
            "peak_rss_mb": [report["peak_rss_mb"] for report in reports],
        }
        print(json.dumps({f"{workers}x{threads}": results[f"{workers}x{threads}"]}), flush=True)
        target.delete()
    from bench.common import cpu

    return {"cpu": cpu(), "pages_per_pdf": pages, "layouts": results}


def split(path: Path, tried: list[tuple[int, int, int]]) -> dict[str, Any]:
    """One long PDF uploaded to real Celery workers, W workers with T model threads each and
    the document split in parts of P pages (0: one worker reads it all): seconds from the
    upload to the document ready. Each layout starts its workers afresh and warms each with a
    small PDF first, so that loading the models is not timed."""
    import functools
    from contextlib import ExitStack

    from django.test import override_settings

    from ingestion.actions import do_add_document
    from portal.supervisor import worker_command
    from tests.ingestion.test_recovery import long_pdf
    from tests.stack import process, wait_for

    data = path.read_bytes()
    results: dict[str, Any] = {}
    for workers, threads, part_pages in tried:
        label = f"{workers}x{threads} parts of {part_pages}" if part_pages else f"{workers}x{threads} whole"
        target = collection(f"bench split {label}")
        with ExitStack() as stack, override_settings(QUICK_INGEST_BYTES=0):
            tmp = tempfile.mkdtemp(prefix="bench-split-")  # the workers' logs, kept for a look
            print(f"{label}: workers' logs in {tmp}", flush=True)
            logs = [Path(tmp) / f"worker-{n}.log" for n in range(workers)]
            env = {"PORTAL_MODEL_THREADS": str(threads), "PORTAL_INGEST_PART_PAGES": str(part_pages)}
            for n, log in enumerate(logs):
                stack.enter_context(process(worker_command(f"bench-{n}@%h", 1, "ingest"), log, **env))

            for n in range(workers):
                do_add_document(target, f"warm-{n}.pdf", long_pdf(2))
            wait_for(functools.partial(ended, target), 300, "the workers warmed up", logs[0])
            started = time.perf_counter()
            document, _run = do_add_document(target, path.name, data)
            wait_for(functools.partial(ended, target), 3600, f"{path.name} indexed", logs[0], every=0.5)
            seconds = time.perf_counter() - started
        document.refresh_from_db()
        results[label] = {
            "workers": workers,
            "threads": threads,
            "part_pages": part_pages,
            "status": document.status,
            "pages": document.page_count,
            "seconds": round(seconds, 1),
            "pages_per_second": round(document.page_count / seconds, 2),
        }
        print(json.dumps({label: results[label]}), flush=True)
        target.delete()
    from bench.common import cpu

    return {"cpu": cpu(), "file": path.name, "layouts": results}


def ended(target) -> bool:  # type: ignore[no-untyped-def]
    """Whether every document of the collection is ready or failed."""
    from knowledge.models import Document

    return not Document.objects.filter(collection=target).exclude(status__in=("ready", "failed")).exists()


def child_share(listing: Path) -> None:
    """One worker of `layouts`: load, say ready, wait for go, ingest its files, report."""
    from knowledge.models import Collection
    from providers import registry

    job = json.loads(listing.read_text())
    target = Collection.objects.get(pk=job["collection"])
    registry.text_embedder().embed_query("warm up")
    ingest_inline(target, f"warm-{os.getpid()}.md", b"# warm\n\nup")
    print("ready", flush=True)
    sys.stdin.readline()
    started = time.perf_counter()
    units = 0
    for name in job["files"]:
        path = Path(name)
        data = sampled_pdf(path, job["pages"]) if path.suffix.lower() == ".pdf" else path.read_bytes()
        ingest_inline(target, f"{path.parent.name}/{path.name}", data)
        units += target.documents.get(rel_path=f"{path.parent.name}/{path.name}").page_count
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"units": units, "seconds": round(time.perf_counter() - started, 1), "peak_rss_mb": round(peak)}))


def plot_profile(profile: dict[str, Any], path: Path) -> None:
    """Seconds per unit of each format, stacked by stage."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ingestion.stages import STAGES

    formats: dict[str, dict[str, float]] = profile["formats"]
    names = sorted(formats)
    figure, axis = plt.subplots(figsize=(8, 4))
    bottom = [0.0] * len(names)
    colours = plt.get_cmap("tab20")
    for index, stage in enumerate(STAGES):
        heights = [formats[name].get(stage, 0.0) / max(formats[name]["units"], 1) for name in names]
        if any(heights):
            axis.bar(names, heights, bottom=bottom, label=stage, color=colours(index))
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    axis.set_ylabel("seconds per page, slide or picture")
    axis.set_title(f"Ingestion time per unit by stage ({profile['units']} units, {profile['seconds']} s)", fontsize=10)
    axis.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def child_rss() -> None:
    """In a fresh process: ingest a 1,000-page PDF, then print the peak RSS in MB."""
    setup()
    target = collection("bench memory")
    ingest_inline(target, "1000.pdf", make_pdf(1000, 1))
    target.delete()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def memory() -> dict[str, float]:
    output = subprocess.run([sys.executable, __file__, "--child-rss"], capture_output=True, text=True, check=True)
    return {"pages": 1000, "peak_rss_mb": float(output.stdout.strip().splitlines()[-1])}


def plot(results: dict[str, dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    bars = [
        ("pipeline / embedder-only", results["throughput"]["pipeline_vs_embedder"], 0.7, "≥"),
        ("re-sync 100 files / 1 file", results["resync"]["resync_vs_single"], 1.2, "≤"),
        ("peak RSS, 1,000 pages (GB)", results["memory"]["peak_rss_mb"] / 1024, 1.5, "<"),
    ]
    for axis, (title, value, target, sign) in zip(axes, bars, strict=True):
        axis.bar(["measured"], [value], color="#1f5fbf")
        axis.axhline(target, color="#b42318", linestyle="--", label=f"target {sign} {target}")
        axis.set_title(title, fontsize=10)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--storage",
        choices=("local", "s3"),
        default="local",
        help="local: every figure, files on the local disk (default); s3: text-PDF throughput on the "
        "local disk and in an S3 bucket of a moto server started for the run, compared",
    )
    parser.add_argument(
        "--pages", type=int, default=200, help="pages of the text PDF for --storage s3 (a few for a smoke run)"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="FOLDER",
        help="time per stage over the files in FOLDER (eval/files: the public evaluation's), and the "
        "text-PDF pipeline against the embedder alone: bench/results/ingest-profile.json and .png",
    )
    parser.add_argument(
        "--pdf-pages", type=int, default=24, help="with --profile: each PDF cut to this many pages (0: whole)"
    )
    parser.add_argument(
        "--first-page",
        type=Path,
        metavar="PDF",
        help="seconds from uploading PDF to its first page among a search's hits, while the rest is "
        "indexed: bench/results/ingest-first-page.json",
    )
    parser.add_argument(
        "--to-end", action="store_true", help="with --first-page: index the whole PDF (else stop once found)"
    )
    parser.add_argument(
        "--layouts",
        type=Path,
        metavar="FOLDER",
        help="the files in FOLDER (PDFs cut to --pdf-pages) ingested by one worker with 2 model threads "
        "and by two workers with 1 each: bench/results/ingest-layouts.json",
    )
    parser.add_argument(
        "--split",
        type=Path,
        metavar="PDF",
        help="one long PDF indexed by real workers: one worker with 2 model threads reading it whole, and "
        "split in parts of 48 pages among one and two workers: bench/results/ingest-split.json",
    )
    parser.add_argument(
        "--split-layouts",
        default="1x2x0,1x2x48,2x1x48",
        help="with --split: WORKERSxTHREADSxPART_PAGES, comma-separated (0 pages: not split)",
    )
    parser.add_argument("--child-rss", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-share", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = arguments()
    if args.child_rss:
        child_rss()
        return
    setup()
    if args.child_share:
        child_share(args.child_share)
        return
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    if args.layouts:
        figures = layouts(args.layouts, args.pdf_pages, [(1, 2), (2, 1)])
        (out / "ingest-layouts.json").write_text(json.dumps(figures, indent=2))
        return
    if args.split:
        tried = [tuple(int(n) for n in layout.split("x")) for layout in args.split_layouts.split(",")]
        figures = split(args.split, tried)  # type: ignore[arg-type]
        (out / "ingest-split.json").write_text(json.dumps(figures, indent=2))
        return
    if args.first_page:
        figures = first_page(args.first_page, args.to_end)
        (out / "ingest-first-page.json").write_text(json.dumps(figures, indent=2))
        print(json.dumps(figures, indent=1))
        return
    if args.profile:
        profiled = {"set": profile_set(args.profile, args.pdf_pages), "text_pdf": throughput(100)}
        (out / "ingest-profile.json").write_text(json.dumps(profiled, indent=2))
        plot_profile(profiled["set"], out / "ingest-profile.png")
        print(json.dumps({key: value for key, value in profiled["set"].items() if key != "files"}, indent=1))
        for key, value in profiled["text_pdf"].items():
            print(f"text_pdf    {key:<24} {value:>10.2f}")
        print("written: bench/results/ingest-profile.json, bench/results/ingest-profile.png")
        return
    if args.storage == "s3":
        figures = storage_throughput(args.pages)
        (out / "ingest-s3.json").write_text(json.dumps(figures, indent=2))
        for key, value in figures.items():
            print(f"storage     {key:<24} {value:>10.2f}")
        print("written: bench/results/ingest-s3.json (target: s3_vs_local >= 0.85)")
        return
    results = {"throughput": throughput(), "resync": resync(), "memory": memory(), "formats": formats()}
    (out / "ingest.json").write_text(json.dumps(results, indent=2))
    plot(results, out / "ingest.png")
    for section, figures in results.items():
        for key, value in figures.items():
            print(f"{section:<11} {key:<24} {value:>10.2f}")
    print("written: bench/results/ingest.json, bench/results/ingest.png")


if __name__ == "__main__":
    main()
