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


def test_no_string_in_the_code_or_templates_is_left_out_of_the_catalogue(tmp_path, settings):
    """The strings marked for translation now are all in the catalogue, translated: a new
    {% translate %} or gettext() without its Chinese fails here, not in front of a person
    reading the portal in Chinese. makemessages writes into the `locale` folder beside the
    files it reads, so it runs in a scratch tree: links to the code and a copy of the
    catalogue."""
    import contextlib
    import shutil

    from django.core.management import call_command

    root = LOCALE.parent
    for folder in root.iterdir():
        if folder.is_dir() and folder.name not in SKIPPED and not folder.name.startswith("."):
            (tmp_path / folder.name).symlink_to(folder)
    shutil.copytree(LOCALE / "zh_Hans", tmp_path / "locale" / "zh_Hans")
    settings.LOCALE_PATHS = [tmp_path / "locale"]
    with contextlib.chdir(tmp_path):
        call_command("makemessages", locale=["zh_Hans"], no_obsolete=True, symlinks=True, verbosity=0)
    entries = [e for e in _entries(tmp_path / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po") if e[0]]
    missing = [msgid for msgid, msgstr, block in entries if not msgstr or "#, fuzzy" in block]
    assert missing == [], "run makemessages -l zh_Hans -l en --no-obsolete and translate these"


# Folders with no string a person reads in the portal (and the catalogue itself, copied).
SKIPPED = {"locale", "var", "eval", "bench", "tests", "docs", "scripts", "node_modules", "requirements", "docker"}


def test_it_uses_the_compiled_catalogue():
    with translation.override("zh-hans"):
        assert translation.gettext("New collection") == "新建知识库"
        assert (
            translation.gettext("You can read this collection but not change it.")
            == "你可以查看该知识库，但不能修改它。"
        )


def test_help_texts_built_from_two_strings_follow_the_language():
    """A help text joined from two lazy strings at import stays lazy (format_lazy), so a page
    in Chinese shows it in Chinese rather than in the language the process started in."""
    from sources.forms import SourceFormBase

    fields = SourceFormBase.base_fields
    with translation.override("zh-hans"):
        for name in ("username", "password"):
            text = str(fields[name].help_text)
            assert "留空则保留已保存的凭据。" in text, text
            assert "Leave empty" not in text
    with translation.override("en"):
        assert str(fields["username"].help_text).endswith("Leave empty to keep the stored ones.")


def test_dates_and_times_take_one_form_in_both_languages():
    """Every page writes a moment the same way, in English as in Chinese (portal/formats)."""
    import datetime as dt

    from django.utils import formats

    moment = dt.datetime(2026, 12, 4, 16, 8, 39)
    for language in ("en", "zh-hans"):
        with translation.override(language):
            assert formats.date_format(moment, "SHORT_DATETIME_FORMAT") == "2026-12-04 16:08"
            assert formats.date_format(moment, "DATETIME_FORMAT") == "2026-12-04 16:08:39"
            assert formats.date_format(moment.date(), "SHORT_DATE_FORMAT") == "2026-12-04"
