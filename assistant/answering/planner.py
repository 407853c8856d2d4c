"""Multi-step answers: the planner splits the question into search steps (the chat model, JSON
out; rules when its output is unusable). The executor (pipeline.py) searches each step and
keeps its evidence; the summarizer (answer.py) answers over all of it."""

from __future__ import annotations

import logging
import re

from django.conf import settings

from assistant.answering import evidence, prompts
from assistant.answering.router import AND_ASKS, parse_json_object
from assistant.answering.types import Plan
from assistant.answering.values import normalise
from common.language import language_of
from common.logs import with_content
from providers.base import ChatMessage, ChatModel

log = logging.getLogger(__name__)

COMPARE_ZH = re.compile(
    r"(?:比较|对比)?(.+?)(?:和|与|跟|同)(.+?)(?:的|在)(.+?)(?:有什么|有何|有哪些|哪个|谁|的区别|的差异|[？?]|$)"
)
COMPARE_EN = re.compile(
    r"(?:compare|difference between|differences between)\s+(?:the\s+)?(.+?)\s+(?:and|with|vs\.?|versus)\s+(.+?)"
    r"(?:\s+(?:in|on|for|regarding|about)\s+(.+?))?[?.]?$",
    re.I,
)
# One question of several asked at once, up to and with its question mark.
QUESTION_END = re.compile(r"[^？?]+[？?]+")
MIN_STEP_CHARS = 4  # "Why?" alone is no search step
# What the first question is about, said before it asks ("In the zoo quick reference, what …",
# "Compare two cells of the vignette: how many …").
LEAD = re.compile(r"^(?:(?:in|on|for|according to|from)\b[^,?]{3,80},\s*|[^,?:]{3,80}:\s+)", re.I)
THEN = re.compile(r"[，,；;。]?\s*(?:然后|再|接着|之后|and then|then|after that)\s*", re.I)


def plan(model: ChatModel | None, question: str) -> Plan:
    """The steps: a question that already says them apart ("A? B?", "先…再…") is split as
    written, without a model call (about 4 s on the local model); otherwise the model's plan,
    with the rules when its output is unusable."""
    apart = said_apart(question)
    if len(apart) >= 2:
        return Plan(apart, "rules")
    if model is not None and settings.ROUTER == "model":
        language = language_of(question)
        system = prompts.PLANNER[language].format(max_steps=settings.PLAN_MAX_STEPS)
        raw = model.complete(
            [ChatMessage("system", system), ChatMessage("user", question)],
            json_mode=True,
            max_tokens=200,
            temperature=0.0,
        ).text
        steps = _parse_steps(raw)
        if len(steps) >= 2:
            return Plan(steps[: settings.PLAN_MAX_STEPS], "model")
        with_content(
            log, logging.WARNING, "Planner output unusable (%d characters); splitting by rules", len(raw), output=raw
        )
    return by_rules(question)


def by_rules(question: str) -> Plan:
    text = question.strip()
    joined = and_asked(text)  # "Compare two cells: how many …, and how many …?" asks twice
    if joined:
        return Plan(joined, "rules")
    match = COMPARE_EN.search(text)
    if match:
        a, b, topic = match.group(1), match.group(2), match.group(3)
        steps = [f"{a} {topic}" if topic else a, f"{b} {topic}" if topic else b]
        return Plan(tuple(step.strip() for step in steps), "rules")
    match = COMPARE_ZH.search(text)
    if match and language_of(text) == "zh":
        a, b, topic = (group.strip() for group in match.groups())
        a = re.sub(r"^(请|帮我)?(比较|对比)(一下)?", "", a)
        return Plan((f"{a}的{topic}", f"{b}的{topic}"), "rules")
    return Plan(said_apart(text) or (text,), "rules")


def and_asked(question: str) -> tuple[str, ...]:
    """An English question that joins a second one with ", and which …?" (router.AND_ASKS)
    as two steps, the second with what the first is about ("In the zoo quick reference, what
    is the first date, and what was the rate on the last date?"); () when there is no such
    join."""
    if language_of(question) != "en":
        return ()
    parts = AND_ASKS.split(question.strip(), maxsplit=1)
    if len(parts) != 2 or min(len(part.strip(" ?")) for part in parts) < MIN_STEP_CHARS:
        return ()
    first = parts[0].strip() + "?"
    lead = LEAD.match(first)
    second = (lead.group() if lead else "") + parts[1].strip()
    return (first, _with_names(first, second))


def said_apart(question: str) -> tuple[str, ...]:
    """The questions asked one after the other ("A？B？", "先 A，再 B", "A, then B"), each
    as written; () when the question is one."""
    text = question.strip()
    asked = [part.strip() for part in QUESTION_END.findall(text) if len(part.strip(" ？?")) >= MIN_STEP_CHARS]
    if len(asked) >= 2 and "".join(asked).replace(" ", "") == text.replace(" ", ""):
        return tuple(_with_names(asked[0], step) for step in asked[: settings.PLAN_MAX_STEPS])
    parts = [part.strip(" ，,；;。") for part in THEN.split(re.sub(r"^先", "", text))]
    parts = [part for part in parts if len(part) >= 2]
    if len(parts) >= 2:
        return tuple(parts[: settings.PLAN_MAX_STEPS])
    return ()


def _with_names(first: str, step: str) -> str:
    """A later question that names nothing the first one named ("xpinyin 的…？脚注里…？")
    searches with the first one's names in front: it is about the same thing."""
    names = _names(first)
    said = normalise(step)
    if step == first or not names or any(evidence.present(name, said) for name in names):
        return step
    if _names(step):
        return step  # it names something of its own ("…, and which sets gnuplot's TrueType path?")
    return f"{' '.join(names)} {step}"


def _names(text: str) -> list[str]:
    """The anchors of `text` that are names, not numbers."""
    return [anchor for anchor in evidence.anchors(text) if not evidence.numbered(anchor)]


def _parse_steps(raw: str) -> tuple[str, ...]:
    data = parse_json_object(raw)
    if data is None or not isinstance(data.get("steps"), list):
        return ()
    steps: list[str] = []
    for step in data["steps"]:
        text = (step.get("question") or step.get("step") or "") if isinstance(step, dict) else step
        text = str(text).strip()
        if text and text not in steps:
            steps.append(text[:300])
    return tuple(steps)
