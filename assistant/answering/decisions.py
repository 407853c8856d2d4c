"""Every decision an answer makes, on record: a frozen `Decision` per stage.

An answer is a sequence of stages (retrieve → read table cells → read sentences → check
anchors → decide → choose or phrase → verify → attach media); each stage that ran records
what it decided, why, and the figures it decided on. A final decision (`final=True`) ends
the answer's reasoning: the stages after it only present what was decided (citations,
attachments); a later stage may overrule it with a final decision of its own (a picture
shown instead of the model's refusal), so the last final decision is the answer's. The
trail is stored on the `Message` (`decisions`), sent with `done`, and
read by the chat's "how it was found", analytics ("why did it decline") and
`manage.py evaluate` (each stage's share of right and wrong answers).

    trail = Trail()
    trail.add("read", "found", "the best sentence holds every anchor", score=0.82)
    trail.add("decide", "answer", "evidence above the answer threshold", final=True)
    trail.final()  # the decide decision; trail.declined() is False

Outcomes that decline ("decline"), and the reason names analytics group them by
(REASONS), are fixed strings: they are data, not prose.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from django.utils.translation import gettext_lazy as _

Stage = Literal["retrieve", "cells", "read", "anchors", "decide", "choose", "phrase", "write", "verify", "attach"]
STAGES: tuple[Stage, ...] = (
    "retrieve",
    "cells",
    "read",
    "anchors",
    "decide",
    "choose",
    "phrase",
    "write",
    "verify",
    "attach",
)
DECLINE = "decline"
# Why an answer was declined, as analytics counts them (and the chat explains them).
REASONS = {
    "near_miss": _("the question names something the passages do not hold"),
    "low_evidence": _("no sentence of the passages is close enough to the question"),
    "unmentioned": _("the passages never mention most of what the question asks about"),
    "unknown": _("the question asks about something no document mentions"),
    "no_measure": _(
        "the question asks for a kind of quantity (a price, a median, an accuracy …) that no passage states"
    ),
    "model_none": _("the model chose none of the candidate sentences"),
    "judge": _("the model, reading the passages, said they do not state the answer"),
    "no_passages": _("the search found nothing"),
    "model_refused": _("the model said the documents do not hold the answer"),
}

Figure = float | int | str | bool | None


@dataclass(frozen=True)
class Decision:
    stage: Stage
    outcome: str  # what the stage decided: "found", "answer", "decline", "chose 2", ...
    reason: str  # a key of REASONS for a decline, else a short phrase
    figures: dict[str, Figure] = field(default_factory=dict)
    final: bool = False  # the answer's reasoning ends here

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Trail:
    """The decisions of one answer, in the order they were made."""

    def __init__(self, decisions: Iterable[Decision] = ()) -> None:
        self.decisions: list[Decision] = list(decisions)

    def add(self, stage: Stage, outcome: str, reason: str, *, final: bool = False, **figures: Figure) -> Decision:
        decision = Decision(stage, outcome, reason, dict(figures), final)
        self.decisions.append(decision)
        return decision

    def final(self) -> Decision | None:
        """The decision that settled the answer (the last final one), if any."""
        return next((decision for decision in reversed(self.decisions) if decision.final), None)

    def declined(self) -> bool:
        """Whether the answer's final decision declines: the documents do not hold the answer."""
        final = self.final()
        return final is not None and final.outcome == DECLINE

    def by_stage(self, stage: Stage) -> Decision | None:
        """The last decision a stage made."""
        return next((decision for decision in reversed(self.decisions) if decision.stage == stage), None)

    def to_json(self) -> list[dict[str, Any]]:
        return [decision.to_json() for decision in self.decisions]

    def __len__(self) -> int:
        return len(self.decisions)


def final_of(stored: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The final decision of a stored trail (`Message.decisions`), if any."""
    return next((decision for decision in reversed(stored) if decision.get("final")), None)
