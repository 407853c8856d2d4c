"""Which memories a turn changes, and which extracted ones are not worth keeping: plain text
rules over terms, no model (service.remember runs them around mem0's `add`).

- `about_user(memory, said)`: an extracted memory is kept only when it is a statement about
  the user grounded in the user's own words (not a restated question, not a fact of the
  documents, not an invention).
- `forget_target(said)`: what a "forget ..." turn names ("忘掉我喜欢表格" → "我喜欢表格").
- `replaced_value(said)`: the old value a correction names ("我从西安调到杭州了" → "西安").
- `matches(target, memory)`: whether a memory is the one a forget or a correction names.
- `not_about_user(memory)`: a stored question (what `manage.py tidy_memories` removes).
- `related(memory, said)`: whether a memory the model says a correction replaces shares a
  word with it.
"""

from __future__ import annotations

import re

from ingestion.terms import terms

# Memories that restate the question ("用户询问年假有几天", "User asks about ...") or what
# the user wanted from the documents: questions, not facts about the user.
QUESTION_MEMORY = re.compile(
    r"^\s*(?:用户|the user|user)\s*(?:询问|问了|问到|问|想知道|想了解|咨询|查询|请求了?(?:关于|有关)|"
    r"在找|寻找|搜索|查找|"
    r"asks?\b|asked\b|is asking|inquire[sd]?\b|is inquiring|wants? to know|wanted to know|would like to know|"
    r"is looking for|looked for|searche[sd]\b|is searching|requests? information|requested information|"
    r"is curious|wonders?\b|wondered\b)",
    re.IGNORECASE,
)
# Words in nearly every memory or every forget/correction: they say nothing about which one.
FILLER = frozenset(
    (  # noqa: SIM905 (three readable lines, not 50 quoted words)
        "用户 user users 忘掉 忘记 忘了 别记 不要记 删除 删掉 forget forgot remove delete erase memory 记忆 "
        "请 please 现在 now 以后 later 已经 already 了 调到 搬到 换到 转到 改到 from moved move moving "
        "actually 其实 不对 不是 correction i'm im i've am 吧 啦"
    ).split()
)
# The old value in a correction: 从<old>调到/搬到/换到/转到/改到<new>; moved from <old> to <new>;
# no longer <old>; 不再<old>; 不在<old>了.
REPLACED = (
    re.compile(r"从\s*(?P<old>[^，,。；;\s]{1,20}?)\s*(?:调到|调去|搬到|搬去|换到|转到|改到|去了|到了|调往|迁到)"),
    re.compile(r"\bfrom\s+(?:the\s+)?(?P<old>[\w' -]{1,40}?)\s+to\b", re.IGNORECASE),
    re.compile(r"\bno longer\s+(?P<old>[\w' -]{1,40})", re.IGNORECASE),
    re.compile(r"\bnot\s+(?P<old>[\w' -]{1,40}?)\s+any\s?more\b", re.IGNORECASE),
    re.compile(r"不再(?P<old>[^，,。；;]{1,20})"),
    re.compile(r"不在(?P<old>[^，,。；;]{1,20}?)了"),
)
FORGET = re.compile(
    r"^\s*(?:请|麻烦)?\s*(?:忘掉|忘记|忘了|别再?记(?:住|着)?|不要再?记(?:住|着)?|删除|删掉)\s*(?:关于)?"
    r"|\b(?:please\s+)?(?:forget|stop remembering|remove|delete|erase)\s+(?:the memory\s+)?(?:that|about)?\s*",
    re.IGNORECASE,
)
GROUNDED_SHARE = 0.5  # of a memory's terms that the user's own words must hold
MATCH_SHARE = 0.5  # of a target's terms that a memory must hold to be the one it names


def stem(term: str) -> str:
    """A crude English stem, enough to match "works" with "work" and "tables" with "table"."""
    for ending in ("ing", "ed", "es", "s"):
        if term.isascii() and len(term) > len(ending) + 3 and term.endswith(ending):
            return term[: -len(ending)]
    return term


def content_terms(text: str) -> set[str]:
    return {stem(term) for term in terms(text) if term not in FILLER}


def _share(part: set[str], whole: set[str]) -> float:
    return len(part & whole) / len(part) if part else 0.0


def units(text: str) -> set[str]:
    """Stemmed words, and each Chinese character apart: a paraphrase keeps most characters
    ("别再给我列参考链接" → "用户希望不再列参考链接") where jieba may cut the words differently."""
    found: set[str] = set()
    for term in content_terms(text):
        found.update({term} if term.isascii() else set(term))
    return found


def about_user(memory: str, said: str) -> bool:
    """A memory worth keeping: not a question or a search, and most of it is the user's own
    words (what a model adds from elsewhere, or invents, fails that)."""
    text = " ".join(memory.split())
    if not text or QUESTION_MEMORY.match(text) or text.rstrip().endswith(("?", "？")):
        return False
    return _share(units(text), units(said)) >= GROUNDED_SHARE


def related(memory: str, said: str) -> bool:
    """Whether a memory shares a word (a Chinese character) with what was said: the least a
    memory that a correction replaces must do (the local model also picks unrelated ones)."""
    return bool(units(memory) & units(said))


# Cards stored before the gate: a question with its answer ("问：…\n答：…", "Q: …\nA: …").
QA_CARD = re.compile(r"^\s*(?:问：[\s\S]*\n答：|Q: [\s\S]*\nA: )")


def not_about_user(memory: str) -> bool:
    """A stored memory that is a question, not a fact about the user: a restated question
    ("用户询问……") or a question-and-answer card (what the portal stored before the gate)."""
    text = memory.strip()
    return bool(QUESTION_MEMORY.match(text) or QA_CARD.match(text))


def forget_target(said: str) -> str:
    """What a forget turn names, without the asking ("Forget that I prefer tables" → "I prefer tables")."""
    return FORGET.sub(" ", said, count=1).strip(" 。.!！")


def replaced_value(said: str) -> str | None:
    """The old value a correction names, when it names one."""
    for pattern in REPLACED:
        found = pattern.search(said)
        if found:
            return found.group("old").strip()
    return None


def matches(target: str, memory: str) -> bool:
    """Whether `memory` holds at least half of the words of `target` (and one at least)."""
    wanted = content_terms(target)
    return bool(wanted) and _share(wanted, content_terms(memory)) >= MATCH_SHARE
