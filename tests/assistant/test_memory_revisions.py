"""What an extraction may keep, and which memories a forget or a correction names
(assistant.memory.revisions): plain rules, no model, no database."""

from __future__ import annotations

import pytest

from assistant.memory.revisions import about_user, forget_target, matches, related, replaced_value


@pytest.mark.parametrize(
    ("memory", "said"),
    [
        ("用户在西安办公室工作", "我在西安办公室工作。"),
        ("用户希望回答用简短的要点", "以后请用简短的要点回答。"),
        ("User works in the Berlin office", "I work in the Berlin office."),
        ("User prefers answers as tables", "From now on, answer me with tables, I prefer them."),
    ],
)
def test_a_memory_in_the_users_own_words_is_kept(memory, said):
    assert about_user(memory, said)


@pytest.mark.parametrize(
    ("memory", "said"),
    [
        ("用户询问年假有几天", "我在西安办公室工作。年假有几天？"),
        ("用户想知道报销流程", "我想知道报销流程"),
        ("User asks how to install the package", "I work in IT."),
        ("User wants to know the refund policy", "I'm in finance."),
        ("用户的年假有几天？", "我在西安办公室工作。"),
        ("User wants answers in short bullet points", "I work in the Berlin office."),  # invented
        ("用户负责 Kubernetes 集群的升级", "我在西安办公室工作。"),  # not what was said
        ("", "我在西安办公室工作。"),
    ],
)
def test_restated_questions_and_inventions_are_not_kept(memory, said):
    assert not about_user(memory, said)


@pytest.mark.parametrize(
    ("said", "target"),
    [
        ("忘掉我喜欢表格。", "我喜欢表格"),
        ("请忘记我在西安工作这件事", "我在西安工作这件事"),
        ("Forget that I prefer tables.", "I prefer tables"),
        ("Please forget about my employee number", "my employee number"),
    ],
)
def test_a_forget_names_what_it_forgets(said, target):
    assert forget_target(said) == target


@pytest.mark.parametrize(
    ("said", "old"),
    [
        ("我从西安调到杭州了。", "西安"),
        ("I moved from the Berlin office to Munich.", "Berlin office"),
        ("I no longer lead the data team", "lead the data team"),
        ("我不再负责报销审核了", "负责报销审核了"),
        ("不对，我是测试工程师。", None),
    ],
)
def test_a_correction_names_the_old_value_when_it_can(said, old):
    assert replaced_value(said) == old


def test_a_target_matches_the_memories_that_hold_its_words():
    assert matches("我喜欢表格", "用户喜欢表格形式的回答")
    assert matches("I prefer tables", "User prefers answers as tables")
    assert matches("西安", "用户在西安办公室工作")
    assert not matches("我喜欢表格", "用户在西安办公室工作")
    assert not matches("西安", "用户调到杭州工作")
    assert not matches("忘掉", "用户喜欢表格形式的回答")  # nothing but the asking: names nothing


def test_a_memory_a_correction_replaces_shares_a_word_with_it():
    assert related("用户希望用英文回答", "其实我更习惯中文，以后还是用中文回答吧。 用户更习惯中文回答")
    assert related("用户是开发工程师", "不对，我是测试工程师。 用户是测试工程师")
    assert not related("用户在北京办公室工作", "我更喜欢简短的回答。 用户喜欢简短的回答")
