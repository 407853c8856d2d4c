"""Multi-step answers: the planner splits the question into search steps (the chat model, JSON
out; rules when its output is unusable). The executor (pipeline.py) searches each step and
keeps its evidence; the summarizer (answer.py) answers over all of it."""

from __future__ import annotations

import logging
import re

from django.conf import settings

from assistant.answering import prompts
from assistant.answering.language import language_of
from assistant.answering.router import parse_json_object
from assistant.answering.types import Plan
from assistant.providers.base import ChatMessage, ChatModel

log = logging.getLogger(__name__)

COMPARE_ZH = re.compile(
    r"(?:比较|对比)?(.+?)(?:和|与|跟|同)(.+?)(?:的|在)(.+?)(?:有什么|有何|有哪些|哪个|谁|的区别|的差异|[？?]|$)"
)
COMPARE_EN = re.compile(
    r"(?:compare|difference between|differences between)\s+(?:the\s+)?(.+?)\s+(?:and|with|vs\.?|versus)\s+(.+?)"
    r"(?:\s+(?:in|on|for|regarding|about)\s+(.+?))?[?.]?$",
    re.I,
)
THEN = re.compile(r"[，,；;。]?\s*(?:然后|再|接着|之后|and then|then|after that)\s*", re.I)


def plan(model: ChatModel | None, question: str) -> Plan:
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
        log.warning("Planner output unusable (%r); splitting by rules", raw[:200])
    return by_rules(question)


def by_rules(question: str) -> Plan:
    text = question.strip()
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
    parts = [part.strip(" ，,；;。") for part in THEN.split(re.sub(r"^先", "", text))]
    parts = [part for part in parts if len(part) >= 2]
    if len(parts) >= 2:
        return Plan(tuple(parts[: settings.PLAN_MAX_STEPS]), "rules")
    return Plan((text,), "rules")


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
