"""Which strategy answers a question (direct, rewrite, multi-step), and the rewrite itself.

Rules decide what they can see: comparisons and chained or double questions go to the
planner, a question that leans on an earlier turn is rewritten, a first question with neither
is answered directly; no model call is spent on these (about 2.5 s on two cores, and the
1.5B model sent no comparison to the planner). The chat model decides only what rules cannot
tell: a question after earlier turns with no visible reference to them. When its output is
unusable (not JSON, an unknown strategy, a rewrite with nothing to rewrite from), rules decide
and the log says so: a router never stops an answer.

A rewrite must keep the earlier turn's topic (its names, numbers, identifiers: see
answering.evidence); one that lost it searches with the earlier question and this one.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any, cast

from django.conf import settings

from assistant.answering import evidence, prompts
from assistant.answering.types import STRATEGIES, Route, Strategy, Turn
from assistant.answering.values import normalise
from common.language import Language, language_of
from common.logs import with_content
from common.text import cjk_count
from ingestion.terms import terms
from providers.base import ChatMessage, ChatModel

log = logging.getLogger(__name__)

# Words that lean on an earlier turn: pronouns, demonstratives, "the former".
REFERENCE_ZH = re.compile(r"它|(?<!其)他|她|这个|那个|这些|那些|这种|那种|这份|那份|上述|前者|后者")
REFERENCE_EN = re.compile(
    r"\b(it|its|they|them|their|this one|that one|these|those|he|she|his|her|the former|the latter|same)\b", re.I
)
# Chained needs, comparisons, and one question about two things.
CHAIN_ZH = re.compile(
    r"先.{1,60}?(再|然后|接着)|然后|比较|对比|区别|差异|异同|分别|各(有|自|是|为|用|要)|两者|二者|另外"
    r"|哪(个|一个|种|位|家|边)[^？?。]{0,16}更|哪(两|三|几)(个|种|项|条|位)"
)
# ", and which …?", ", and in what …?": a second question joined to the first (English); the
# planner splits it there without a model (answering.planner.and_asked).
AND_ASKS = re.compile(
    r",\s+and\s+(?=(?:(?:in|on|at|by|for|from|with|to|under)\s+)?(?:what|which|how|who|whom|whose|when|where)\b)",
    re.I,
)
CHAIN_EN = re.compile(
    r"\b(compare|comparison|difference|differences|differ|versus|vs\.?|and then|after that|then find|then list|"
    r"both|respectively|each of (the|them)|which is (better|cheaper|longer|shorter|larger|smaller)|"
    r"(which|what) (two|three|pair of))\b"
    rf"|{AND_ASKS.pattern}"
    r"|\b(who|which|what)\b[^?]{0,60}\b(older|younger|larger|smaller|bigger|higher|lower|longer|shorter|more|less"
    r"|fewer|earlier|later|better|worse|cheaper|faster|slower)\b[^?]*\bor\b",
    re.I,
)
# A question mark before the last one: two questions asked at once.
TWO_QUESTIONS = re.compile(r"[？?].*\S.*[？?]?$")
# Very short follow-ups ("and the price?", "那价格呢？") only make sense with the history.
SHORT_FOLLOW_UP = re.compile(r"^(那么?|还有)|^(and|what about|how about)\b|呢[？?]?$", re.I)


def route(model: ChatModel | None, question: str, history: Sequence[Turn]) -> Route:
    """The strategy for `question`: the rules', unless they see nothing and there is history
    (then the model's); `model` None (or PORTAL_ROUTER=rules) uses the rules only."""
    ruled = by_rules(question, history)
    if model is None or settings.ROUTER == "rules" or ruled.strategy != "direct" or not history:
        return ruled
    language = language_of(question)
    messages = [
        ChatMessage("system", prompts.ROUTER[language]),
        ChatMessage("user", _with_history(language, question, history)),
    ]
    raw = model.complete(messages, json_mode=True, max_tokens=96, temperature=0.0).text
    decided = _parse_route(raw)
    if decided is None:
        fallback = by_rules(question, history)
        with_content(
            log,
            logging.WARNING,
            "Router output unusable (%d characters); rules chose %s",
            len(raw),
            fallback.strategy,
            output=raw,
        )
        return fallback
    strategy, reason = decided
    # Small models see a reference in every question once there is history; a rewrite that
    # nothing in the question asks for costs a model call and risks dragging history in.
    if strategy == "rewrite" and not (history and leans_on_history(question)):
        with_content(
            log,
            logging.INFO,
            "Router asked for a rewrite of a standalone question; answering directly",
            question=question,
        )
        return Route("direct", reason, "model")
    return Route(strategy, reason, "model")


def by_rules(question: str, history: Sequence[Turn]) -> Route:
    if CHAIN_ZH.search(question) or CHAIN_EN.search(question) or TWO_QUESTIONS.search(question.strip()):
        return Route("multi_step", "chained needs or a comparison", "rules")
    if history and leans_on_history(question):
        return Route("rewrite", "refers to an earlier turn", "rules")
    return Route("direct", "clear intent", "rules")


def leans_on_history(question: str) -> bool:
    """A pronoun or demonstrative, a "what about …" follow-up, or too few words to stand alone."""
    text = question.strip()
    if REFERENCE_ZH.search(text) or REFERENCE_EN.search(text) or SHORT_FOLLOW_UP.search(text):
        return True
    cjk = cjk_count(text)
    return cjk < 8 if cjk else len(text.split()) < 4


def _parse_route(raw: str) -> tuple[Strategy, str] | None:
    data = parse_json_object(raw)
    if data is None:
        return None
    strategy = str(data.get("strategy", "")).strip().lower().replace("-", "_").replace(" ", "_")
    if strategy not in STRATEGIES:
        return None
    return cast(Strategy, strategy), str(data.get("reason", "")).strip()[:300]


def parse_json_object(raw: str) -> dict[str, Any] | None:
    """The first JSON object in a model's output (models wrap it in prose or code fences)."""
    start, end = raw.find("{"), raw.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(raw[start : end + 1])
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def rewrite(model: ChatModel, question: str, history: Sequence[Turn]) -> str:
    """`question` made standalone with the history; the question itself when the model's
    output is not a usable question."""
    language = language_of(question)
    messages = [
        ChatMessage("system", prompts.REWRITE[language]),
        ChatMessage("user", _with_history(language, question, history)),
    ]
    raw = model.complete(messages, max_tokens=96, temperature=0.0).text
    rewritten = _clean_rewrite(raw)
    if not rewritten or len(rewritten) > max(3 * len(question), len(question) + 120):
        with_content(
            log,
            logging.WARNING,
            "Rewrite unusable (%d characters); searching the question as asked",
            len(raw),
            output=raw,
        )
        return with_topic(question, history)
    if not keeps_topic(rewritten, history):
        with_content(
            log, logging.INFO, "A rewrite lost the earlier turn's topic; searching both questions", rewrite=rewritten
        )
        return with_topic(question, history)
    return rewritten


def keeps_topic(rewritten: str, history: Sequence[Turn]) -> bool:
    """Whether the rewrite names the earlier question's topic: one of its anchors (names,
    numbers, identifiers) when it has any, else half of its search terms."""
    if not history:
        return True
    earlier = history[-1].question
    text = normalise(rewritten)
    named = evidence.anchors(earlier)
    if named:
        return any(evidence.present(anchor, text) for anchor in named)
    topic = set(terms(earlier))
    return not topic or len(topic & set(terms(rewritten))) >= len(topic) / 2


def with_topic(question: str, history: Sequence[Turn]) -> str:
    """The earlier question and this one, for a search that keeps the topic."""
    return f"{history[-1].question} {question}" if history else question


REWRITE_PREFIX = re.compile(r"^(改写后的问题|改写|问题|rewritten question|rewritten|question)\s*[:：]\s*", re.I)


def _clean_rewrite(raw: str) -> str:
    lines = [line.strip() for line in raw.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    line = REWRITE_PREFIX.sub("", lines[0]).strip()
    return line.strip("\"'“”‘’「」`").strip()


def _with_history(language: Language, question: str, history: Sequence[Turn]) -> str:
    turns = list(history)[-settings.HISTORY_TURNS :] if settings.HISTORY_TURNS else []
    if not turns:
        return f"{prompts.label(language, 'question')}: {question}"
    lines = [f"{prompts.label(language, 'history')}:"]
    for turn in turns:
        lines.append(f"Q: {turn.question[:300]}")
        lines.append(f"A: {turn.answer[:300]}")
    lines.append("")
    lines.append(f"{prompts.label(language, 'question')}: {question}")
    return "\n".join(lines)
