"""An answer and an upload on the same cores: how long the chat model takes to read a prompt
and the embedder takes per passage, each alone and both at once, under each way the models'
OpenMP threads may wait at a barrier (spin for long, OpenMP's default; spin briefly, the
portal's PORTAL_MODEL_SPIN_COUNT; sleep at once). Prints figures, writes
bench/results/contention.json and bench/results/contention.png.

    DATABASE_URL=... .venv/bin/python bench/contention.py    # about 6 minutes on 2 cores

Each measurement runs in a process of its own, so that the setting is read when the model
libraries load, as in the portal's web and worker processes. The prompt and passages are
pages of a real manual from the public evaluation (R's, eval/files/en/manual.pdf).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
MANUAL = ROOT / "eval/files/en/manual.pdf"
# OpenMP's own default spin count (libgomp), stated so that the portal's default does not apply.
POLICIES = {
    "spin long (OpenMP default)": {"GOMP_SPINCOUNT": "300000"},
    "spin briefly (portal default)": {"GOMP_SPINCOUNT": "1000"},
    "sleep at once": {"OMP_WAIT_POLICY": "passive"},
}
PROMPTS = 3  # answers timed per measurement
PASSAGES = 12  # per embedder call, as ingestion.index.EMBED_BATCH_CHARS makes them


def manual_words(start: int, pages: int) -> list[str]:
    import pymupdf

    with pymupdf.open(MANUAL) as document:
        return " ".join(document[n].get_text() for n in range(start, start + pages)).split()


def chat() -> dict[str, Any]:
    """Seconds to read a prompt of about 300 tokens and write 8, PROMPTS times."""
    import django

    django.setup()
    from providers import chat_model
    from providers.base import ChatMessage

    words = manual_words(10, 10)
    model = chat_model()
    model.complete([ChatMessage("user", "hi")], max_tokens=2, temperature=0.0)  # loaded and warm
    seconds = []
    for n in range(PROMPTS):
        prompt = " ".join(words[n * 200 : n * 200 + 200])
        started = time.perf_counter()
        model.complete([ChatMessage("system", "Summarise."), ChatMessage("user", prompt)], max_tokens=8)
        seconds.append(time.perf_counter() - started)
    return {"seconds": seconds}


def embed(stop: Path | None, seconds: float) -> dict[str, Any]:
    """Milliseconds per passage of about 70 words, in calls of PASSAGES, until `stop` exists
    (or for `seconds`); prints "ready" once the model is loaded."""
    import django

    django.setup()
    from providers import registry

    words = manual_words(20, 20)
    passages = [" ".join(words[n * 70 : n * 70 + 70]) for n in range(PASSAGES)]
    embedder = registry.text_embedder()
    embedder.embed_documents(passages[:2])
    print("ready", flush=True)
    started, done = time.perf_counter(), 0
    while (stop is None and time.perf_counter() - started < seconds) or (stop is not None and not stop.exists()):
        embedder.embed_documents(passages)
        done += len(passages)
    return {"ms_per_passage": (time.perf_counter() - started) / max(done, 1) * 1000}


def child(role: str, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    return subprocess.Popen(
        [sys.executable, __file__, "--child", role, *extra],
        env={**clean, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def result(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = process.communicate(timeout=900)
    if process.returncode:
        raise SystemExit(f"a measurement failed (exit {process.returncode}): {out[-2000:]}")
    value: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return value


def measure(env: dict[str, str], stop: Path) -> dict[str, float]:
    alone_chat = result(child("chat", env))["seconds"]
    alone_embed = result(child("embed", env, "--seconds", "20"))["ms_per_passage"]
    stop.unlink(missing_ok=True)
    upload = child("embed", env, "--stop", str(stop))
    assert upload.stdout is not None
    if upload.stdout.readline().strip() != "ready":
        raise SystemExit("the embedder did not start")
    time.sleep(3)  # the embedder at work before the question comes
    together_chat = result(child("chat", env))["seconds"]
    stop.touch()
    together_embed = result(upload)["ms_per_passage"]
    return {
        "chat_alone_s": round(statistics.median(alone_chat), 2),
        "chat_together_s": round(statistics.median(together_chat), 2),
        "embed_alone_ms": round(alone_embed, 1),
        "embed_together_ms": round(together_embed, 1),
    }


def plot(results: dict[str, dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    names = list(results)
    positions = range(len(names))
    for axis, (alone, together, label) in (
        (left, ("chat_alone_s", "chat_together_s", "s to read a ~300-token prompt")),
        (right, ("embed_alone_ms", "embed_together_ms", "ms per passage embedded")),
    ):
        axis.bar([p - 0.2 for p in positions], [results[n][alone] for n in names], 0.4, label="alone")
        axis.bar([p + 0.2 for p in positions], [results[n][together] for n in names], 0.4, label="both at once")
        axis.set_xticks(list(positions), [n.replace(" (", "\n(") for n in names], fontsize=8)
        axis.set_ylabel(label)
        axis.legend(fontsize=8)
    figure.suptitle("An answer and an upload on 2 cores, by OpenMP wait policy", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", choices=["chat", "embed"], help=argparse.SUPPRESS)
    parser.add_argument("--stop", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=20.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "chat":
        print(json.dumps(chat()))
        return
    if args.child == "embed":
        print(json.dumps(embed(args.stop, args.seconds)))
        return
    import django

    django.setup()
    from bench.common import cpu

    out = ROOT / "bench/results"
    out.mkdir(parents=True, exist_ok=True)
    stop = out / ".contention-stop"
    results = {}
    for name, env in POLICIES.items():
        results[name] = measure(env, stop)
        print(f"{name:<32} {json.dumps(results[name])}", flush=True)
    stop.unlink(missing_ok=True)
    (out / "contention.json").write_text(json.dumps({"cpu": cpu(), "policies": results}, indent=2))
    plot(results, out / "contention.png")
    print("written: bench/results/contention.json, bench/results/contention.png")


if __name__ == "__main__":
    main()
