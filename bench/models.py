"""Speed of the local models on this machine: prints a table and writes bench/results/models.json.

    .venv/bin/python bench/models.py            # everything, about 2-3 minutes on 2 cores
    .venv/bin/python bench/models.py --only chat

Embedding is measured in a fresh process per thread count (OpenMP reads its thread count
once per process). Figures are medians of repeated runs; absolute times on shared machines
are noisy, compare ratios within one run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

ZH = (
    "公司的差旅报销政策规定，员工出差期间的交通、住宿和餐饮费用可以凭发票报销。机票应预订经济舱，"
    "高铁二等座，住宿标准按城市分级执行：一线城市每晚不超过六百元，其他城市不超过四百元。报销申请须在"
    "出差结束后十五个工作日内提交，超过期限的需要部门负责人书面说明原因。"
)
EN = (
    "Travel expenses are reimbursed against receipts for transport, lodging and meals. Book economy "
    "flights and second-class trains; hotels are capped at 600 a night in tier-one cities and 400 elsewhere. "
    "Claims are due within fifteen working days."
)


def timed(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def setup_django() -> None:
    import django

    django.setup()


def bench_embedding(threads: int) -> dict[str, float]:
    setup_django()
    from django.conf import settings

    from providers.local.embedder import LocalEmbedder

    config = dataclasses.replace(settings.MODEL_ROLES["embedding"], threads=threads)
    embedder = LocalEmbedder(config)
    embedder.embed_query("warm up")
    zh, en = [ZH[:200]] * 32, [EN[:200]] * 32
    return {
        "zh_texts_per_s": 32 / timed(lambda: embedder.embed_documents(zh), 2),
        "en_texts_per_s": 32 / timed(lambda: embedder.embed_documents(en), 2),
        "query_ms": 1000 * timed(lambda: embedder.embed_query("差旅住宿标准是多少？"), 15),
    }


def bench_chat() -> dict[str, float]:
    setup_django()
    from providers import chat_model
    from providers.base import ChatMessage

    model = chat_model()
    model.complete([ChatMessage("user", "hi")], max_tokens=1)  # load
    runs = iter(range(100))

    def fresh_prompt() -> list[ChatMessage]:
        # A different first token each time: llama.cpp would otherwise reuse the cached prefix.
        return [
            ChatMessage("system", f"{next(runs)}. 根据资料简短回答。"),
            ChatMessage("user", f"资料：{ZH}\n{EN}\n问题：一线城市住宿标准是多少？"),
        ]

    prompt_only = timed(lambda: model.complete(fresh_prompt(), max_tokens=1, temperature=0.0), 3)
    prompt_tokens = model.complete(fresh_prompt(), max_tokens=1).prompt_tokens
    started = time.perf_counter()
    result = model.complete(
        [ChatMessage("user", "Write three sentences about the sea.")], max_tokens=96, temperature=0.0
    )
    total = time.perf_counter() - started
    return {
        "prompt_tokens": prompt_tokens,
        "prompt_tokens_per_s": prompt_tokens / prompt_only,
        "generated_tokens": result.completion_tokens,
        "generation_tokens_per_s": result.completion_tokens / total,
    }


def bench_rerank() -> dict[str, float]:
    setup_django()
    from django.conf import settings

    from providers.local.rerank import ChatJudgeReranker

    reranker = ChatJudgeReranker(dataclasses.replace(settings.MODEL_ROLES["rerank"], provider="local"))
    passages = [ZH[:200], EN[:200], "公司年会定于 12 月 14 日举行。", "The server room is kept at 22 degrees."]
    reranker.score("住宿标准", passages[:1])  # load
    per_call = timed(lambda: reranker.score("一线城市住宿标准是多少？", passages), 2)
    return {"seconds_per_passage": per_call / len(passages)}


def a4_page(path: Path) -> None:
    from PIL import Image, ImageDraw, ImageFont

    fonts = [
        Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),
        Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"),
    ]
    font_path = next((f for f in fonts if f.exists()), None)
    if font_path is None:
        raise SystemExit("A CJK font is needed for the OCR page: apt-get install fonts-wqy-microhei")
    page = Image.new("RGB", (1654, 2339), "white")  # A4 at 200 dpi
    draw = ImageDraw.Draw(page)
    font = ImageFont.truetype(str(font_path), 34)
    text = (ZH + EN) * 3
    for row in range(40):
        draw.text((120, 120 + row * 52), text[row * 22 : row * 22 + 44], fill="black", font=font)
    page.save(path)


def bench_ocr() -> dict[str, float]:
    setup_django()
    from providers import ocr

    path = ROOT / "var" / "bench-a4.png"
    path.parent.mkdir(exist_ok=True)
    a4_page(path)
    engine = ocr()
    lines = len(engine.read(path).lines)  # also loads the model
    return {"seconds_per_a4_page_200dpi": timed(lambda: engine.read(path), 2), "lines_read": lines}


def bench_speech() -> dict[str, float]:
    import shutil
    import wave

    setup_django()
    from providers import speech_to_text

    espeak = shutil.which("espeak-ng")
    if espeak is None:
        return {}
    clip = ROOT / "var" / "bench-speech.wav"
    subprocess.run([espeak, "-w", str(clip), EN], check=True)
    with wave.open(str(clip)) as audio:
        duration = audio.getnframes() / audio.getframerate()
    model = speech_to_text()
    model.transcribe(clip)  # load
    seconds = timed(lambda: model.transcribe(clip), 2)
    return {"audio_seconds": duration, "real_time_factor": seconds / duration}


def run_child(name: str, threads: int) -> dict[str, float]:
    output = subprocess.run(
        [sys.executable, __file__, "--child", name, "--threads", str(threads)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "OMP_NUM_THREADS": str(threads)},
    )
    return json.loads(output.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=["embedding", "chat", "rerank", "ocr", "speech"])
    parser.add_argument("--child")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(bench_embedding(args.threads)))
        return
    results: dict[str, object] = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()}}
    steps: dict[str, Callable[[], object]] = {
        "embedding": lambda: {f"{n}_threads": run_child("embedding", n) for n in (1, 2)},
        "chat": bench_chat,
        "rerank": bench_rerank,
        "ocr": bench_ocr,
        "speech": bench_speech,
    }
    for name, step in steps.items():
        if args.only in (None, name):
            results[name] = step()
    out = ROOT / "bench" / "results" / "models.json"
    out.parent.mkdir(exist_ok=True)
    if args.only and out.exists():  # keep the other sections of an earlier full run
        results = {**json.loads(out.read_text()), **results}
    out.write_text(json.dumps(results, indent=2, ensure_ascii=False))
    for name, figures in results.items():
        if name == "machine":
            continue
        for key, value in _flatten(figures):
            print(f"{name:<10} {key:<40} {value:>10.2f}")
    print(f"written: {out.relative_to(ROOT)}")


def _flatten(figures: object, prefix: str = "") -> list[tuple[str, float]]:
    if isinstance(figures, dict):
        return [pair for key, value in figures.items() for pair in _flatten(value, f"{prefix}{key}.")]
    return [(prefix.rstrip("."), float(figures))]  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
