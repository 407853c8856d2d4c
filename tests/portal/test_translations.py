"""Every user-facing string has a Simplified Chinese translation, and the compiled
catalogue matches the source one."""

from __future__ import annotations

import re
from pathlib import Path

from django.utils import translation

LOCALE = Path(__file__).resolve().parents[2] / "locale"


def _entries(po: Path) -> list[tuple[str, str, str]]:
    entries = []
    for block in po.read_text(encoding="utf-8").split("\n\n"):
        match = re.search(r'^msgid ((?:".*"\n)+)msgstr ((?:".*"\n?)+)', block + "\n", re.M)
        if match:
            msgid, msgstr = ("".join(re.findall(r'"(.*)"', group)) for group in match.groups())
            entries.append((msgid, msgstr, block))
    return entries


def test_it_translates_every_string_into_chinese():
    entries = [e for e in _entries(LOCALE / "zh_Hans" / "LC_MESSAGES" / "django.po") if e[0]]
    assert len(entries) > 50
    untranslated = [msgid for msgid, msgstr, block in entries if not msgstr or "#, fuzzy" in block]
    assert untranslated == []


def test_it_uses_the_compiled_catalogue():
    with translation.override("zh-hans"):
        assert translation.gettext("New collection") == "新建知识库"
        assert (
            translation.gettext("You can read this collection but not change it.")
            == "你可以查看该知识库，但不能修改它。"
        )
