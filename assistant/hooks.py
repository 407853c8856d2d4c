"""What the chat page shows that only a higher layer knows, filled in by that layer.

assistant is below quality and does not import it ([tool.importlinter] in pyproject.toml);
quality registers its answers here in QualityConfig.ready() (quality/apps.py), as ingestion
does for knowledge (knowledge/hooks.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from portal.typing import AnyUser

# The user's own feedback on these answers, by message id: {"rating", "comment",
# "correct_answer", "correct_document", "correct_page"} each.
AnswerFeedback = Callable[[AnyUser, Sequence[int]], dict[int, dict[str, Any]]]

_answer_feedback: AnswerFeedback | None = None


def register_answer_feedback(function: AnswerFeedback) -> None:
    global _answer_feedback
    _answer_feedback = function


def answer_feedback(user: AnyUser, message_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """The feedback the user gave on these answers; nothing while no app has registered."""
    if _answer_feedback is None or not message_ids:
        return {}
    return _answer_feedback(user, message_ids)


def feedback_enabled() -> bool:
    """Whether an app takes feedback on answers (the chat page shows its buttons then)."""
    return _answer_feedback is not None
