"""OCR offline: RapidOCR (PP-OCR models inside the package) on onnxruntime, zh + en.

PP-OCR's detector finds vertical columns of CJK text; RapidOCR turns each tall crop a
quarter turn to the left, and its direction classifier then turns most of them upside
down, so on a page of vertical Chinese most columns came back empty or garbled. The
recogniser itself reads the characters lying on their side well (366 of 366 on that page).
So a tall crop the classifier turned is also read as it was cut, and the reading with the
higher confidence is kept; a label that really is the other way up (a chart's axis) keeps
the classifier's reading. docs/ocr.md has the figures and the other way tried.
"""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

from providers.base import ImageInput, OcrLine, OcrResult, ProviderError
from providers.config import RoleConfig

# Bump when what read() returns for the same picture changes: enrichment caches the lines
# under model_id (DerivedText), and an old entry must not pass for a new reading.
READER_VERSION = 2
TALL = 1.5  # height / width from which RapidOCR (and so this reader) treats a crop as vertical


class LocalOCR:
    def __init__(self, config: RoleConfig) -> None:
        self.config = config
        self.model_id = f"local:{config.model}:v{READER_VERSION}"
        self._engine: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
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
            found = _read(self._load(), np.ascontiguousarray(np.asarray(picture)[:, :, ::-1]))  # BGR
        lines = [OcrLine(text=text, box=corners, confidence=score) for text, corners, score in found]
        return OcrResult(lines=tuple(lines), width=picture.width, height=picture.height)


def _read(engine: Any, bgr: Any) -> list[tuple[str, tuple[tuple[float, float], ...], float]]:
    """RapidOCR's own steps (rapidocr 3.10: preprocess, detect and crop, direction, recognise,
    map the boxes back), with a second candidate for each tall crop the classifier turned."""
    import numpy as np
    from rapidocr.main import RapidOCRError
    from rapidocr.utils.process_img import map_boxes_to_original

    height, width = bgr.shape[:2]
    img, op_record = engine.preprocess_img(bgr)
    try:
        crops, detected = engine.detect_and_crop(img, op_record)
    except RapidOCRError:  # nothing that looks like text
        return []
    turned, _ = engine.cls_and_rotate(crops)  # works on copies: `crops` stay as cut
    second = [n for n, box in enumerate(detected.boxes) if _is_tall(box) and not np.array_equal(turned[n], crops[n])]
    recognised = engine.recognize_txt(list(turned) + [crops[n] for n in second])
    texts, scores = list(recognised.txts), [float(score) for score in recognised.scores]
    for m, n in enumerate(second, start=len(crops)):
        if scores[m] > scores[n]:
            texts[n], scores[n] = texts[m], scores[m]
    boxes = map_boxes_to_original(detected.boxes, op_record, height, width)
    texts, scores = texts[: len(crops)], scores[: len(crops)]
    return [
        (str(text), tuple((float(x), float(y)) for x, y in box.tolist()), score)
        for box, text, score in zip(boxes, texts, scores, strict=True)
        if str(text).strip() and score >= engine.text_score
    ]


def _is_tall(box: Any) -> bool:
    """RapidOCR's own test (utils.process_img.get_rotate_crop_image) on the box's corners."""
    import numpy as np

    width = max(np.linalg.norm(box[0] - box[1]), np.linalg.norm(box[2] - box[3]))
    height = max(np.linalg.norm(box[0] - box[3]), np.linalg.norm(box[1] - box[2]))
    return bool(width > 0 and height / width >= TALL)
