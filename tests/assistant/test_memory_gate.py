"""The memory gate (assistant/memory/gate.py) on the labelled set tests/files/memory/: which
turns reach mem0 at all. Pure Python: no database, no model."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from assistant.memory.gate import NOTHING, Gate, gate

FILES = Path(__file__).resolve().parent.parent / "files" / "memory"
KEPT_KINDS = {"statement", "correction", "forget", "remember"}
DROPPED_KINDS = {"question", "smalltalk", "request"}


def _lines(name: str) -> list[dict]:
    return [json.loads(line) for line in (FILES / name).read_text(encoding="utf-8").splitlines() if line.strip()]


TURNS = _lines("turns.jsonl")
SEQUENCES = _lines("sequences.jsonl")

# Targets: issue 19 asks ≥ 0.90 precision and ≥ 0.85 recall of the gate itself. The holdout
# was fixed before the gate was written and never used to tune it.
PRECISION = {"dev": 0.90, "holdout": 0.90}
RECALL = {"dev": 0.85, "holdout": 0.85}
KIND_ACCURACY = 0.8


def _split(name: str) -> list[dict]:
    return [turn for turn in TURNS if turn["split"] == name]


def _scores(turns: list[dict]) -> tuple[float, float]:
    """Precision and recall of keep over turns."""
    kept = [turn for turn in turns if gate(turn["text"]).keep]
    right = [turn for turn in kept if turn["keep"]]
    wanted = [turn for turn in turns if turn["keep"]]
    return len(right) / max(len(kept), 1), len(right) / len(wanted)


# The labelled set is what it says it is


def test_turns_are_well_formed():
    assert len(TURNS) >= 120
    assert len({turn["id"] for turn in TURNS}) == len(TURNS)
    for turn in TURNS:
        assert turn["lang"] in {"zh", "en"}, turn["id"]
        assert turn["split"] in {"dev", "holdout"}, turn["id"]
        assert turn["text"].strip(), turn["id"]
        if turn["keep"]:
            assert turn["kind"] in KEPT_KINDS, turn["id"]
            assert turn["facts"], turn["id"]
            assert turn["terms"], turn["id"]
        else:
            assert turn["kind"] in DROPPED_KINDS, turn["id"]
            assert "facts" not in turn, turn["id"]
            assert "terms" not in turn, turn["id"]
    assert sum(turn["lang"] == "zh" for turn in TURNS) >= 0.45 * len(TURNS)
    kept = [turn for turn in TURNS if turn["keep"]]
    assert len(kept) >= 40
    assert sum(turn["kind"] == "correction" for turn in kept) >= 8
    assert sum(turn["kind"] == "forget" for turn in kept) >= 6
    assert 0.25 <= len(_split("holdout")) / len(TURNS) <= 0.35
    for name in ("dev", "holdout"):  # both splits hold every kind in both languages
        assert {(turn["lang"], turn["kind"]) for turn in _split(name)} == {
            (lang, kind) for lang in ("zh", "en") for kind in KEPT_KINDS | DROPPED_KINDS
        }, name


def test_sequences_are_well_formed():
    assert len(SEQUENCES) >= 8
    assert {sequence["lang"] for sequence in SEQUENCES} == {"zh", "en"}
    assert len({sequence["id"] for sequence in SEQUENCES}) == len(SEQUENCES)
    for sequence in SEQUENCES:
        assert len(sequence["turns"]) >= 2, sequence["id"]
        end = sequence["end"]
        assert set(end) <= {"present", "absent", "count"}, sequence["id"]
        assert end["present"] or end["absent"], sequence["id"]
        for terms in end["present"]:
            assert terms, sequence["id"]
            assert all(isinstance(term, str) and term for term in terms), sequence["id"]
        for check in end["absent"]:
            if isinstance(check, dict):
                assert set(check) == {"all", "unless"}, sequence["id"]
                assert check["all"], sequence["id"]
                assert check["unless"], sequence["id"]
            else:
                assert isinstance(check, str), sequence["id"]
                assert check, sequence["id"]
    # a forget sequence ends with nothing about what was forgotten
    assert any(gate(sequence["turns"][-1]).kind == "forget" for sequence in SEQUENCES)


# The gate on the labelled set


@pytest.mark.parametrize("name", ["dev", "holdout"])
def test_precision_and_recall(name):
    precision, recall = _scores(_split(name))
    assert precision >= PRECISION[name], f"{name} precision {precision:.3f}"
    assert recall >= RECALL[name], f"{name} recall {recall:.3f}"


@pytest.mark.parametrize("name", ["dev", "holdout"])
def test_corrections_and_forgets_have_their_kind(name):
    turns = [turn for turn in _split(name) if turn["keep"] and turn["kind"] in {"correction", "forget"}]
    right = [turn for turn in turns if gate(turn["text"]).kind == turn["kind"]]
    assert len(right) / len(turns) >= KIND_ACCURACY, [turn["id"] for turn in turns if turn not in right]


@pytest.mark.parametrize("turn", TURNS, ids=[turn["id"] for turn in TURNS])
def test_kept_sentences_are_the_users_own_words_in_order(turn):
    result = gate(turn["text"])
    assert result.keep == bool(result.sentences) == bool(result.kind)
    assert result.kind in KEPT_KINDS | {""}
    position = 0
    for sentence in result.sentences:
        assert sentence
        assert sentence == sentence.strip()
        found = turn["text"].find(sentence, position)
        assert found >= 0, sentence
        position = found + len(sentence)


# Cases


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("我在西安办公室工作。年假有几天？", ("我在西安办公室工作。",)),
        ("年假有几天？我在西安办公室工作。", ("我在西安办公室工作。",)),
        ("我是 SRE，请问 Prometheus 告警规则的文档在哪？", ("我是 SRE",)),
        ("我是HR，想看一下今年的招聘计划。", ("我是HR",)),
        ("I work in the Berlin office. How many vacation days do we get?", ("I work in the Berlin office.",)),
        ("I live in Paris, what is the local holiday calendar?", ("I live in Paris",)),
        ("Thanks! I'm a data analyst.\nWhere is the sales table?", ("I'm a data analyst.",)),
        ("我喜欢表格形式的回答；我在成都分公司！报销要多久？", ("我喜欢表格形式的回答；", "我在成都分公司！")),
    ],
)
def test_a_statement_is_kept_without_the_question(text, kept):
    result = gate(text)
    assert result == Gate(keep=True, kind="statement", sentences=kept)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("以后都用表格回答。", "statement"),
        ("From now on, answer in Chinese.", "statement"),
        ("请记住：我的汇报对象是张伟。", "remember"),
        ("Remember that I'm based in Singapore.", "remember"),
        ("我从西安调到杭州了。", "correction"),
        ("I no longer work on the billing API; I'm on search now.", "correction"),
        ("忘掉我喜欢表格。", "forget"),
        ("Forget that I like tables.", "forget"),
        ("我喜欢表格。不过忘掉我在西安工作这件事。", "forget"),  # the strongest kind is the turn's
    ],
)
def test_kinds(text, kind):
    assert gate(text).kind == kind


@pytest.mark.parametrize(
    "text",
    [
        "我想知道年假有几天？",
        "我在哪里可以找到安装指南？",
        "用表格列出这些参数。",  # a format for once is not a preference
        "不要用表格，这次直接列点就行。",
        "我喜欢这个回答，谢谢！",
        "忘了问一下，报销需要发票原件吗？",  # not a request to forget
        "请忘记刚才的问题，重新回答。",
        "Forget the previous question; what is the maximum upload size?",
        "Forget about it, how do I log out?",
        "I remember the manual mentioned a safe mode. Where is it?",
        "Can you remember what the handbook says about overtime?",
        "I moved the file to the shared folder, but it doesn't show up. Why?",
        "I never got the onboarding email; who should I contact?",
        "I'd prefer a shorter version of that answer.",
        "Actually, the table on page 3 says 12 days.",
        "I'm fine, thanks.",
    ],
)
def test_questions_and_requests_keep_nothing(text):
    assert gate(text) == NOTHING


@pytest.mark.parametrize("text", ["", " ", "\n\t  \n", "。。。", "？！", "...", "\u3000"])
def test_empty_text_keeps_nothing(text):
    assert gate(text) == NOTHING


def test_very_long_text_is_read_quickly_and_in_order():
    questions = "年假有几天？How do I install it? " * 5_000  # about 150,000 characters
    text = "我在西安办公室工作。" + questions + "I prefer short answers."
    started = time.perf_counter()
    result = gate(text)
    assert time.perf_counter() - started < 5
    assert result.sentences == ("我在西安办公室工作。", "I prefer short answers.")


def test_a_pasted_paragraph_is_not_a_statement_about_the_user():
    """One sentence longer than MAX_SENTENCE is pasted material, even in the first person."""
    pasted = "I am the committee chair and I work in the Geneva office " + "and review every filing " * 20
    assert gate(pasted) == NOTHING
    assert gate(pasted + ". I work in the Lyon office.").sentences == ("I work in the Lyon office.",)


def test_a_gate_is_frozen():
    result = gate("I'm a data analyst.")
    with pytest.raises(AttributeError):
        result.keep = False  # type: ignore[misc]


def test_each_kept_sentence_carries_its_own_kind():
    result = gate("我喜欢表格。不过忘掉我在西安工作这件事。")
    assert result.kind == "forget"
    assert result.kinds == ("statement", "forget")
    assert len(result.kinds) == len(result.sentences)
