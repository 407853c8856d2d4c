"""Words a file does not hold as text, read by models between parsing and chunking: OCR of
scanned pages, photos, pictures and video frames (with boxes, so citations can highlight the
region), speech recognition of audio into timed text, and a vision caption of each picture
where a vision model is configured.

Parsers stay model-free and deterministic; this stage runs in the worker, once per page
that needs (re)indexing, and caches every model output by the hash of its input
(DerivedText), so a changed file, a rebuilt index version or a retried run never pays twice
for the same picture or clip.
"""

from __future__ import annotations

import hashlib
import io
import logging
import tempfile
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from common.text import is_cjk
from ingestion import pictures, reading_order
from ingestion.models import DerivedText
from ingestion.parsers.base import BBox, Block, ParsedPage
from ingestion.stages import stage
from providers import registry
from providers.base import ProviderError, Tag, Tags

log = logging.getLogger(__name__)
MIN_CONFIDENCE = 0.5  # OCR lines read with less confidence than this are noise
# A line the OCR reads as one letter, digit or mark ("8", "|") is a fragment of a picture, not
# text anyone searches for: not indexed. One Chinese character (a sign's 出) is a word and kept.
MIN_LINE_CHARS = 2
CAPTION_PROMPTS = {
    "zh": "用一两句话描述这张图片的内容，包括其中的文字。",
    "en": "Describe this picture in one or two sentences, including any text in it.",
}


def enrich(parsed: ParsedPage, *, language: str = "en") -> ParsedPage:
    """The page with OCR text, transcripts, captions and picture descriptions added where it
    needs them."""
    blocks: list[Block] = []
    for block in parsed.blocks:
        if block.kind == "image" and block.image is not None:
            with stage("picture_description"):
                rgb = _pixels(block.image)
                flat = pictures.flat_share(rgb)
            # A picture file, or a picture on a page the OCR reads whole (a scan): read once, there.
            whole = parsed.needs_ocr
            read = block.read_text or (not whole and pictures.holds_text(rgb, flat))
            blocks.append(_read_image(block, language, read))
            taken = str(parsed.meta.get("taken_at") or "")
            blocks.append(
                replace(
                    # The OCR lines of the picture, where it was read (a picture file's are the page's).
                    _picture(block.image, rgb, flat, block.bbox, taken, read or block.image == parsed.render),
                    t_start=block.t_start,
                    t_end=block.t_end,
                )
            )
        elif block.kind == "audio" and block.audio is not None:
            blocks.extend(_transcribe(block))
        else:
            blocks.append(block)
    if parsed.needs_ocr and parsed.render is not None:
        blocks.extend(_ocr_page(parsed))
    return replace(parsed, blocks=tuple(blocks))


def _read_image(block: Block, language: str, read: bool) -> Block:
    """The image block with its caption and, where `read`, the words the OCR reads in it."""
    assert block.image is not None
    parts = [block.text]
    if registry.available("vision"):
        parts.append(_caption(block.image, language))
    if read:
        lines = reading_order.order(_ocr(block.image))
        sign = reading_order.is_sign(lines)
        said = [line for line in lines if worth_indexing(line[0])]
        parts.append("\n".join(text for line in said for text in reading_order.readings(line, sign=sign)))
    text = "\n".join(part.strip() for part in parts if part and part.strip())
    return replace(block, text=text)


def _pixels(image: bytes) -> Any:
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(image)) as opened:
        return np.asarray(opened.convert("RGB"))


def _picture(image: bytes, rgb: Any, flat: float, bbox: BBox | None, taken: str, read: bool) -> Block:
    """The picture's own words (ingestion.pictures): its kind, its colours and its objects'
    (with the tagger's labels where PROVIDER_TAGGING is on) and the date it was taken. `read`:
    the OCR reads this picture (its lines tell a screenshot from a chart)."""
    lines = [(box[1], box[3]) for _text, box in _ocr(image)] if read else []
    with stage("picture_description"):
        tags = _tags(image) if registry.available("tagging") else None
        measured = pictures.measure(rgb, lines, flat)
        tags = pictures.trusted(tags, measured.kind) if tags else None
        object_colours = [pictures.colours_of(rgb, tag.box) for tag in tags.objects] if tags else []
        text = pictures.description(measured, tags, object_colours, taken)
    return Block("picture", text, bbox=bbox, image=image)


def _tags(image: bytes) -> Tags | None:
    tagger = registry.picture_tagger()

    def tag() -> Any:
        return asdict(tagger.tag(image))

    output = _cached(DerivedText.Task.TAGS, tagger.model_id, image, tag, default=None)
    if output is None:
        return None
    return Tags(
        labels=tuple(Tag(**{**tag, "box": None}) for tag in output["labels"]),
        objects=tuple(Tag(**{**tag, "box": tuple(tag["box"])}) for tag in output["objects"]),
    )


def _ocr_page(parsed: ParsedPage) -> list[Block]:
    """Each line the OCR reads on the page render, in reading order (ingestion.reading_order),
    with its box in page units; a short CJK line on a sign also carries its reverse."""
    assert parsed.render is not None
    lines = reading_order.order(_ocr(parsed.render))
    if not lines:
        return []
    from PIL import Image

    with Image.open(io.BytesIO(parsed.render)) as picture:
        pixels_wide = picture.width
    scale = (parsed.width or pixels_wide) / pixels_wide
    sign = reading_order.is_sign(lines)
    return [
        Block("text", "\n".join(reading_order.readings(line, sign=sign)), bbox=_scaled(line[1], scale))
        for line in lines
        if worth_indexing(line[0])
    ]


def worth_indexing(line: str) -> bool:
    """Whether an OCR line says something (MIN_LINE_CHARS)."""
    text = "".join(line.split())
    return len(text) >= MIN_LINE_CHARS or any(is_cjk(char) for char in text)


def _scaled(box: BBox, scale: float) -> BBox:
    x0, y0, x1, y1 = (round(value * scale, 1) for value in box)
    return (x0, y0, x1, y1)


def _ocr(image: bytes) -> list[tuple[str, BBox]]:
    """Lines of text in the image as the OCR returns them (top to bottom), with their pixel
    boxes; the cache keeps them so, and reading_order orders them after it."""

    def read() -> Any:
        with stage("ocr"):
            result = registry.ocr().read(image)
        return [
            [line.text, _box(line.box)]
            for line in result.lines
            if line.confidence >= MIN_CONFIDENCE and line.text.strip()
        ]

    output = _cached(DerivedText.Task.OCR, registry.ocr().model_id, image, read, default=[])
    return [(str(text), (box[0], box[1], box[2], box[3])) for text, box in output]


def _box(corners: tuple[tuple[float, float], ...]) -> list[float]:
    xs, ys = [x for x, _y in corners], [y for _x, y in corners]
    return [round(min(xs), 1), round(min(ys), 1), round(max(xs), 1), round(max(ys), 1)]


def _caption(image: bytes, language: str) -> str:
    model = registry.vision_model()
    prompt = CAPTION_PROMPTS["zh" if language.startswith("zh") else "en"]
    output = _cached(
        DerivedText.Task.CAPTION,
        f"{model.model_id}:{language[:2]}",
        image,
        lambda: _described(model, image, prompt),
        default="",
    )
    return str(output)


def _described(model: Any, image: bytes, prompt: str) -> str:
    with stage("caption"):
        return str(model.describe(image, prompt)).strip()


def _transcribe(block: Block) -> list[Block]:
    """The audio as timed text blocks, times counted from the start of the recording."""
    assert block.audio is not None
    model = registry.speech_to_text()

    def transcribe() -> Any:
        with tempfile.TemporaryDirectory() as tmp, stage("speech"):
            path = Path(tmp) / "clip.wav"
            path.write_bytes(block.audio or b"")
            transcript = model.transcribe(path)
        return [[segment.start, segment.end, segment.text] for segment in transcript.segments if segment.text]

    offset = block.t_start or 0.0
    segments = _cached(DerivedText.Task.SPEECH, model.model_id, block.audio, transcribe, default=[])
    return [
        Block("text", str(text), t_start=round(offset + float(start), 2), t_end=round(offset + float(end), 2))
        for start, end, text in segments
    ]


def _cached(task: str, model_id: str, data: bytes, compute: Callable[[], Any], *, default: Any) -> Any:
    """The model's output for this input, computed once. A model that cannot read one input
    (a broken picture, silent audio) leaves that input without words rather than failing the
    whole document; transient errors (retryable) propagate so the task retries later."""
    digest = hashlib.sha256(data).hexdigest()
    found = DerivedText.objects.filter(task=task, model_id=model_id, input_sha256=digest).first()
    if found is not None:
        return found.output
    try:
        output = compute()
    except ProviderError as exc:
        if exc.retryable:
            raise
        log.warning("%s by %s failed on input %s: %s", task, model_id, digest[:12], exc)
        return default
    DerivedText.objects.get_or_create(task=task, model_id=model_id, input_sha256=digest, defaults={"output": output})
    return output
