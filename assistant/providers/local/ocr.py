"""OCR offline: RapidOCR (PP-OCR models inside the package) on onnxruntime, zh + en."""

from __future__ import annotations

import io
import threading
from pathlib import Path

from assistant.providers.base import ImageInput, OcrLine, OcrResult, ProviderError
from assistant.providers.config import RoleConfig


class LocalOCR:
    def __init__(self, config: RoleConfig) -> None:
        self.config = config
        self.model_id = f"local:{config.model}"
        self._engine: object | None = None
        self._lock = threading.Lock()

    def _load(self):  # type: ignore[no-untyped-def]
        if self._engine is None:
            from rapidocr import RapidOCR

            threads = self.config.threads
            self._engine = RapidOCR(
                params={
                    "Global.log_level": "warning",
                    "EngineConfig.onnxruntime.intra_op_num_threads": threads,
                    "EngineConfig.onnxruntime.inter_op_num_threads": 1,
                }
            )
        return self._engine

    def read(self, image: ImageInput) -> OcrResult:
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(io.BytesIO(image) if isinstance(image, bytes) else Path(image)) as opened:
                picture = opened.convert("RGB")
        except (OSError, UnidentifiedImageError) as exc:
            raise ProviderError("ocr", "local", f"cannot read the image: {exc}") from exc
        import numpy as np

        with self._lock:
            output = self._load()(np.asarray(picture)[:, :, ::-1])  # RapidOCR takes BGR arrays
        lines = []
        if output.boxes is not None:
            for box, text, score in zip(output.boxes.tolist(), output.txts, output.scores, strict=True):
                corners = tuple((float(x), float(y)) for x, y in box)
                lines.append(OcrLine(text=str(text), box=corners, confidence=float(score)))
        return OcrResult(lines=tuple(lines), width=picture.width, height=picture.height)
