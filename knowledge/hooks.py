"""What knowledge's pages show that only a higher layer knows, filled in by that layer.

knowledge is below ingestion and does not import it ([tool.importlinter] in pyproject.toml);
ingestion registers its answers here in IngestionConfig.ready() (ingestion/apps.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

# For index versions being built, by id: (runs ended, runs in all).
BuildProgress = Callable[[Sequence[int]], dict[int, tuple[int, int]]]

_build_progress: BuildProgress | None = None


def register_build_progress(function: BuildProgress) -> None:
    global _build_progress
    _build_progress = function


def build_progress(version_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """How far each of these building versions is; nothing while no app has registered."""
    if _build_progress is None or not version_ids:
        return {}
    return _build_progress(version_ids)
