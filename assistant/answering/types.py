"""What passes between the router, planner, executor and summarizer: frozen dataclasses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from assistant.retrieval.types import Hit

Strategy = Literal["direct", "rewrite", "multi_step"]
STRATEGIES: tuple[Strategy, ...] = ("direct", "rewrite", "multi_step")
# How an answer is made once its passages are found (answering.modes; PORTAL_ANSWER_MODE).
MODES = ("evidence", "confirm", "choose", "phrase", "passages")


@dataclass(frozen=True)
class Turn:
    """One earlier question and its answer, for the router and the rewriter."""

    question: str
    answer: str


@dataclass(frozen=True)
class Route:
    strategy: Strategy
    reason: str
    by: Literal["model", "rules"]  # "rules" when the model was not asked or its output was unusable


@dataclass(frozen=True)
class Plan:
    steps: tuple[str, ...]
    by: Literal["model", "rules"]


@dataclass(frozen=True)
class StepEvidence:
    number: int  # 1-based
    query: str
    hits: tuple[Hit, ...]


@dataclass(frozen=True)
class Source:
    """A passage given to the chat model as [n]."""

    number: int
    hit: Hit
    step: int | None = None  # which plan step found it, in multi-step answers


@dataclass(frozen=True)
class Answer:
    text: str
    abstain: bool
    sources: tuple[Source, ...]  # all given to the model
    used: tuple[int, ...] = field(default=())  # the [n] the text cites, in order of first use
