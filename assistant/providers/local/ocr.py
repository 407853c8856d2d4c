"""OCR offline: RapidOCR (PP-OCR models inside the package) on onnxruntime, zh + en.

PP-OCR's detector finds vertical columns of CJK text, but its recogniser reads horizontal
lines: RapidOCR turns a tall crop a quarter turn and the recogniser then reads characters
lying on their side (on a vertical page, 6 of 12 columns came back empty and the rest
mostly garbled). Here a tall crop is also cut into its characters, which are laid side by
side upright, and read again; the reading with the higher confidence is kept, so a rotated
Latin word (a chart's axis label) still reads as before. docs/ocr.md has the figures.
"""

from __future__ import annotations

import io
import itertools
import threading
from pathlib import Path
from typing import Any

from assistant.providers.base import ImageInput, OcrLine, OcrResult, ProviderError
from assistant.providers.config import RoleConfig

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
    map the boxes back), with a second, upright candidate for each tall crop."""
    import numpy as np
    from rapidocr.main import RapidOCRError
    from rapidocr.utils.process_img import map_boxes_to_original

    height, width = bgr.shape[:2]
    img, op_record = engine.preprocess_img(bgr)
    try:
        crops, detected = engine.detect_and_crop(img, op_record)
    except RapidOCRError:  # nothing that looks like text
        return []
    tall = [n for n, box in enumerate(detected.boxes) if _is_tall(box)]
    # RapidOCR turned each tall crop a quarter turn to the left; turn it back to cut it.
    strips = [upright_strip(np.rot90(crops[n], k=-1)) for n in tall]
    turned, _ = engine.cls_and_rotate(crops)
    # The strips skip the direction classifier: they are upright by construction, and it
    # turned some of them upside down (2 of 12 columns on the vertical test page).
    candidates = list(turned) + [strip for strip in strips if strip is not None]
    recognised = engine.recognize_txt(candidates)
    texts, scores = list(recognised.txts), [float(score) for score in recognised.scores]
    extra = iter(range(len(crops), len(candidates)))
    for n, strip in zip(tall, strips, strict=True):
        if strip is None:
            continue
        m = next(extra)
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


def upright_strip(column: Any) -> Any:
    """A vertical column of text (a BGR crop, characters upright, read top to bottom) as one
    horizontal line: cut where rows hold no ink, join the pieces into characters about as
    tall as the ink is wide, and lay them left to right. None where there is no ink."""
    import numpy as np

    gray = column.mean(axis=2) if column.ndim == 3 else column.astype(float)
    background = float(np.median(gray))
    spread = float(gray.max() - gray.min())
    if spread < 32:
        return None
    ink = np.abs(gray - background) > spread / 3
    rows = np.flatnonzero(ink.any(axis=1))
    cols = np.flatnonzero(ink.any(axis=0))
    if rows.size == 0:
        return None
    size = int(cols[-1] - cols[0] + 1)  # a character is about as tall as the column's ink is wide
    weight = ink.sum(axis=1)
    cells: list[list[int]] = []
    for start, end in _runs(weight > 0):
        if cells and end - cells[-1][0] <= 1.15 * size and start - cells[-1][1] < 0.25 * size:
            cells[-1][1] = end
        else:
            cells.append([start, end])
    cells = [piece for start, end in cells for piece in _split(weight, start, end, size)]
    pad = max(2, size // 6)
    tallest = max(end - start for start, end in cells)
    pieces = [column[start:end] for start, end in cells]
    out = np.full(
        (tallest + 2 * pad, sum(piece.shape[1] for piece in pieces) + pad * (len(pieces) + 1), 3),
        np.uint8(background),
        dtype=np.uint8,
    )
    x = pad
    for piece in pieces:
        top = pad + (tallest - piece.shape[0]) // 2
        out[top : top + piece.shape[0], x : x + piece.shape[1]] = piece if piece.ndim == 3 else piece[:, :, None]
        x += piece.shape[1] + pad
    return out


def _split(weight: Any, start: int, end: int, size: int) -> list[list[int]]:
    """A run of rows holding several touching characters (bold type, tight setting), cut
    into as many as its height holds, each cut at the row with the least ink near where
    the characters should meet."""
    count = round((end - start) / size)
    if count < 2:
        return [[start, end]]
    pitch = (end - start) / count
    cuts = [start]
    for n in range(1, count):
        near = int(start + n * pitch)
        low, high = max(cuts[-1] + 1, near - size // 4), min(end - 1, near + size // 4)
        cuts.append(low + int(weight[low : high + 1].argmin()) if high > low else near)
    cuts.append(end)
    return [[a, b] for a, b in itertools.pairwise(cuts) if b > a]


def _runs(flags: Any) -> list[tuple[int, int]]:
    """[start, end) of each run of True."""
    runs: list[tuple[int, int]] = []
    start = None
    for n, flag in enumerate(flags.tolist()):
        if flag and start is None:
            start = n
        elif not flag and start is not None:
            runs.append((start, n))
            start = None
    if start is not None:
        runs.append((start, len(flags)))
    return runs
