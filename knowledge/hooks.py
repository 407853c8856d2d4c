"""What knowledge's pages show that only a higher layer knows, filled in by that layer.

knowledge is below ingestion and does not import it ([tool.importlinter] in pyproject.toml);
ingestion registers its answers here in IngestionConfig.ready() (ingestion/apps.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from knowledge.models import IndexVersion

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


# Given a version that has just been built: True when the gate takes over its flip (it is
# evaluated first and flipped or held back later), False when it may flip now.
FlipGate = Callable[["IndexVersion"], bool]

_flip_gate: FlipGate | None = None


def register_flip_gate(function: FlipGate) -> None:
    global _flip_gate
    _flip_gate = function


def gate_holds(version: IndexVersion) -> bool:
    """Whether the registered gate (quality/gate.py) holds the flip of `version` for now."""
    return _flip_gate is not None and _flip_gate(version)
