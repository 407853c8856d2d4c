"""Sources kept in sync (issue 23): what a re-sync of a 1,000-file source costs. Prints the
figures and writes bench/results/sync.json and sync.png.

    .venv/bin/python bench/sync.py                 # folder and Git, 1,000 files, 3 rounds
    .venv/bin/python bench/sync.py --kinds folder --files 200

For each kind (a server folder; a Git repository made with the git CLI, read through a local
path as a repository on this server would be):

1. The source: --files Markdown files, each the first 800 characters of one module of
   Python's standard library as installed here (real text, PSF licence), in 20 folders.
   The first sync ingests them all (not timed against anything; printed).
2. An unchanged re-scan, timed --scans times: listing, comparing and nothing else. Target:
   at most 5 s for 1,000 files.
3. --rounds rounds (5) of: 10 files edited and 5 deleted (committed, for Git), then one
   re-sync timed; and, as the yardstick, the same 10 edited files ingested alone into an
   empty collection (stored, parsed, embedded, indexed), before the re-sync in odd rounds
   and after it in even ones. Target: the median ratio of re-sync to yardstick at most 1.2.

Ingestion runs in this process (`inline`, as `manage.py sources --sync ID --inline`), so the
times are the work itself, without a queue. The machine is shared: figures of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
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
from django.core.files.base import ContentFile  # noqa: E402

from ingestion import pipeline  # noqa: E402
from ingestion.actions import do_add_document  # noqa: E402
from knowledge import actions  # noqa: E402
from knowledge.models import Collection  # noqa: E402
from providers import registry  # noqa: E402
from sources import sync  # noqa: E402
from sources.actions import do_save_source  # noqa: E402
from sources.models import Source, SyncRun  # noqa: E402

EMAIL = "bench-sync@example.com"
OUT = ROOT / "bench" / "results" / "sync.json"
SCAN_TARGET_S = 5.0
RATIO_TARGET = 1.2


def texts(count: int) -> dict[str, str]:
    """`count` Markdown files from the standard library's modules, in 20 folders."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    modules = sorted(p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts)
    files: dict[str, str] = {}
    for n, module in enumerate(modules[:count]):
        text = module.read_text(encoding="utf-8", errors="replace")[:800]
        name = module.relative_to(stdlib).as_posix().replace("/", "-").removesuffix(".py")
        files[f"part-{n % 20:02d}/{name}.md"] = f"# {name}\n\n```\n{text}\n```\n"
    if len(files) < count:
        raise SystemExit(f"only {len(files)} standard library modules found")
    return files


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def write(folder: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def timed_sync(source: Source) -> tuple[float, SyncRun]:
    run = SyncRun.objects.create(source=source)
    started = time.perf_counter()
    if not claim(run):
        raise SystemExit("the sync run was taken by someone else")
    sync.execute(run, inline=True)
    seconds = time.perf_counter() - started
    if run.status != SyncRun.Status.SUCCEEDED:
        raise SystemExit(f"sync failed: {run.error}")
    return seconds, run


def yardstick(user: Any, files: dict[str, str], tag: str) -> float:
    """The edited files ingested alone into an empty collection."""
    collection = actions.do_create_collection(user, f"bench-sync-alone-{tag}-{time.time_ns()}")
    embedder = registry.text_embedder()
    started = time.perf_counter()
    for rel, text in files.items():
        _document, run = do_add_document(collection, rel, ContentFile(text.encode()), enqueue=False)
        if run is None or not claim(run):
            raise SystemExit(f"{rel} was not queued")
        pipeline.ingest_document(run, embedder)
    seconds = time.perf_counter() - started
    actions.do_delete_collection(collection)
    return seconds


def bench_kind(kind: str, user: Any, files: dict[str, str], args: argparse.Namespace, work: Path) -> dict[str, Any]:
    folder = work / kind / "share"
    folder.mkdir(parents=True)
    write(folder, files)
    if kind == "git":
        git(folder, "init", "-q", "-b", "main")
        git(folder, "add", "-A")
        git(folder, "-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-qm", "first")
    collection = actions.do_create_collection(user, f"bench-sync-{kind}-{time.time_ns()}")
    source = Source(
        collection=collection, name=kind, kind=kind, url=str(folder), branch="main" if kind == "git" else ""
    )
    do_save_source(source)
    first, run = timed_sync(source)
    print(f"{kind}: first sync of {len(files)} files: {first:.1f} s {run.counts}", flush=True)
    scans = []
    for _ in range(args.scans):
        seconds, run = timed_sync(source)
        if run.counts["unchanged"] != len(files):
            raise SystemExit(f"an unchanged re-scan found changes: {run.counts}")
        scans.append(seconds)
    print(f"{kind}: unchanged re-scan, median of {len(scans)}: {statistics.median(scans):.2f} s", flush=True)
    names = sorted(files)
    resyncs, alone, ratios = [], [], []
    for round_ in range(args.rounds):
        start = round_ * 15
        edited = {rel: files[rel] + f"\nEdited in round {round_}: the figures were checked again.\n"
                  for rel in names[start : start + 10]}  # fmt: skip
        deleted = names[start + 10 : start + 15]
        write(folder, edited)
        for rel in deleted:
            (folder / rel).unlink()
        if kind == "git":
            git(folder, "add", "-A")
            git(folder, "-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-qm", f"r{round_}")
        # Alternate which goes first, so that a machine getting busier or quieter during a
        # round does not always favour the same side.
        if round_ % 2:
            yard = yardstick(user, edited, f"{kind}{round_}")
        seconds, run = timed_sync(source)
        if (run.counts["changed"], run.counts["deleted"]) != (10, 5):
            raise SystemExit(f"the re-sync did not find 10 changed and 5 deleted: {run.counts}")
        if not round_ % 2:
            yard = yardstick(user, edited, f"{kind}{round_}")
        resyncs.append(seconds)
        alone.append(yard)
        ratios.append(seconds / yard)
        print(f"{kind} round {round_}: re-sync {seconds:.2f} s, the 10 files alone {yard:.2f} s, "
              f"ratio {seconds / yard:.2f}", flush=True)  # fmt: skip
    actions.do_delete_collection(collection)
    return {
        "files": len(files),
        "first_sync_s": round(first, 2),
        "unchanged_rescan_s": [round(s, 3) for s in scans],
        "unchanged_rescan_median_s": round(statistics.median(scans), 3),
        "resync_10_changed_5_deleted_s": [round(s, 3) for s in resyncs],
        "ten_files_alone_s": [round(s, 3) for s in alone],
        "ratios": [round(r, 3) for r in ratios],
        "ratio_median": round(statistics.median(ratios), 3),
        "rescan_within_target": statistics.median(scans) <= SCAN_TARGET_S,
        "ratio_within_target": statistics.median(ratios) <= RATIO_TARGET,
    }


def plot(report: dict[str, Any], path: Path) -> None:
    """Each round's re-sync beside the 10 files alone, per kind, and the unchanged re-scans."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [kind for kind in ("folder", "git") if kind in report]
    figure, axes = plt.subplots(1, len(kinds) + 1, figsize=(4 * (len(kinds) + 1), 3.4))
    for axis, kind in zip(axes, kinds, strict=False):
        figures = report[kind]
        rounds = range(1, len(figures["ratios"]) + 1)
        axis.plot(rounds, figures["resync_10_changed_5_deleted_s"], "o-", label="re-sync (10 changed, 5 deleted)")
        axis.plot(rounds, figures["ten_files_alone_s"], "s--", label="the 10 files alone")
        axis.set_title(f"{kind}: median ratio {figures['ratio_median']:.2f} (target ≤ {RATIO_TARGET})", fontsize=9)
        axis.set_xlabel("round")
        axis.set_ylabel("seconds")
        axis.set_ylim(bottom=0)
        axis.legend(fontsize=7)
    scans = axes[-1]
    scans.bar(kinds, [report[kind]["unchanged_rescan_median_s"] for kind in kinds], color="#1f5fbf")
    scans.axhline(SCAN_TARGET_S, color="#b42318", linestyle="--", label=f"target ≤ {SCAN_TARGET_S:g} s")
    scans.set_title(f"unchanged re-scan of {report[kinds[0]]['files']:,} files (median)", fontsize=9)
    scans.set_ylabel("seconds")
    scans.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--kinds", default="folder,git")
    parser.add_argument("--scans", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    user = get_user_model().objects.filter(email=EMAIL).first()
    if user is None:
        user = get_user_model().objects.create_user(username=EMAIL, email=EMAIL, password=None)
    files = texts(args.files)
    report: dict[str, Any] = {"cpus": os.cpu_count(), "embedder": registry.text_embedder().model_id}
    with tempfile.TemporaryDirectory(prefix="bench-sync-") as work:
        settings.SOURCE_ROOTS = [work]
        settings.SOURCE_WORKDIR = Path(work) / "clones"
        for kind in args.kinds.split(","):
            report[kind] = bench_kind(kind, user, files, args, Path(work))
    Collection.objects.filter(name__startswith="bench-sync-").delete()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, args.out.with_suffix(".png"))
    print(json.dumps(report, indent=2))
    shutil.rmtree(settings.SOURCE_WORKDIR, ignore_errors=True)


if __name__ == "__main__":
    main()
