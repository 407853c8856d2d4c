"""`manage.py models`: each role's provider and model, checked live (dims, latency)."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from providers import registry
from providers.base import ROLES, ChatMessage, NotAvailable, ProviderError, Role
from providers.local.model_files import QWEN_CHAT_1_5B, TAGGER_FILES, WHISPER_BASE, SplitModel, ensure_model

# Local models whose weights are joined (or copied) from packages and verified, by role.
LOCAL_FILES: dict[Role, tuple[SplitModel, ...]] = {
    "chat": (QWEN_CHAT_1_5B,),
    "speech": (WHISPER_BASE,),
    "tagging": TAGGER_FILES,
}


class Command(BaseCommand):
    help = "List each model role's provider and model and check it live; exit 1 if a configured role fails."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--install", action="store_true", help="Only join and verify the local model files, without loading them."
        )
        parser.add_argument("--role", choices=ROLES, action="append", help="Check only these roles.")

    def handle(self, *args: Any, install: bool, role: list[Role] | None, **options: Any) -> None:
        if install:
            for name, specs in LOCAL_FILES.items():
                if registry.role_config(name).provider == "local":
                    for spec in specs:
                        path = ensure_model(spec, settings.MODELS_DIR, progress=self.stdout.write)
                        self.stdout.write(f"{name} model ready: {path}")
            return
        failed = [name for name in (role or ROLES) if not self._check(name)]
        if failed:
            raise CommandError(f"Model roles failing: {', '.join(failed)}.")

    def _check(self, role: Role) -> bool:
        config = registry.role_config(role)
        label = f"{role:<16} {config.provider:<10} {config.model or '-':<40}"
        started = time.perf_counter()
        try:
            detail = PROBES[role](registry.get(role))
        except NotAvailable as exc:
            self.stdout.write(f"{label} off: {str(exc).split(': ', 1)[1]}")
            return True
        except ProviderError as exc:
            self.stdout.write(self.style.ERROR(f"{label} FAILED: {exc}"))
            return False
        elapsed = time.perf_counter() - started
        self.stdout.write(self.style.SUCCESS(f"{label} ok  {detail}  {elapsed:.2f} s"))
        return True


def _embedding(model: Any) -> str:
    vector = model.embed_query("退款政策 refund policy")
    return f"dims {len(vector)}"


def _chat(model: Any) -> str:
    result = model.complete([ChatMessage("user", "Reply with the single word OK.")], max_tokens=4, temperature=0.0)
    return f"said {result.text.strip()[:20]!r}"


def _ocr(model: Any) -> str:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (240, 60), "white")
    ImageDraw.Draw(image).text((10, 20), "HELLO 2026", fill="black")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return f"read {model.read(buffer.getvalue()).text!r}"


def _rerank(model: Any) -> str:
    scores = model.score("refund policy", ["Refunds within 30 days.", "The party is on the 14th."])
    return f"scores {[round(s, 3) for s in scores]}"


def _vision(model: Any) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (220, 30, 30)).save(buffer, format="PNG")
    return f"said {model.describe(buffer.getvalue(), 'What colour is this image? One word.')[:30]!r}"


def _speech(model: Any) -> str:
    import tempfile
    import wave
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "silence.wav"
        with wave.open(str(path), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(16000)
            out.writeframes(b"\x00\x00" * 16000)
        transcript = model.transcribe(path)
    return f"transcribed 1 s of silence into {len(transcript.segments)} segment(s)"


def _tagging(model: Any) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (96, 96), (40, 90, 200)).save(buffer, format="PNG")
    tags = model.tag(buffer.getvalue())
    return f"tagged a blue square: {len(tags.labels)} label(s), {len(tags.objects)} object(s)"


def _unprobed(model: Any) -> str:
    return f"loaded {model.model_id}"


PROBES: dict[Role, Callable[[Any], str]] = {
    "embedding": _embedding,
    "image_embedding": _unprobed,
    "rerank": _rerank,
    "chat": _chat,
    "vision": _vision,
    "ocr": _ocr,
    "speech": _speech,
    "tagging": _tagging,
}
