"""Speech to text offline: Whisper base (MIT) converted for faster-whisper (CTranslate2, int8),
its weights joined and verified from their packages like the chat model's."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from django.conf import settings

from providers.base import AudioInput, ProviderError, Segment, Transcript
from providers.config import RoleConfig
from providers.local.model_files import WHISPER_BASE, ensure_model


class LocalSpeechToText:
    def __init__(self, config: RoleConfig) -> None:
        self.config = config
        self.model_id = f"local:{config.model}"
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._model is None:
            try:
                from faster_whisper import WhisperModel
            except ImportError as exc:
                raise ProviderError(
                    "speech", "local", f"faster-whisper is not installed ({exc}): install requirements/base.txt"
                ) from exc
            directory = ensure_model(WHISPER_BASE, settings.MODELS_DIR).parent
            self._model = WhisperModel(
                str(directory),
                device="cpu",
                compute_type="int8",
                cpu_threads=self.config.threads,
                local_files_only=True,
            )
        return self._model

    def transcribe(self, audio: AudioInput) -> Transcript:
        path = Path(audio)
        if not path.is_file():
            raise ProviderError("speech", "local", f"no audio file at {path}")
        with self._lock:
            model = self._load()
            try:
                segments, info = model.transcribe(str(path), beam_size=1)
                timed = tuple(Segment(start=float(s.start), end=float(s.end), text=s.text.strip()) for s in segments)
            except Exception as exc:  # PyAV and CTranslate2 raise their own types for bad audio
                raise ProviderError("speech", "local", f"cannot transcribe {path.name}: {exc}") from exc
        return Transcript(segments=timed, language=str(info.language or ""))
