"""Per-user memory with real mem0 on the test database (pgvector) and the local embedder:
isolation by UID everywhere (service, REST, answers), Chinese search, the infer=False
fallback, edit/delete/export, deleted users forgotten, the dims check, telemetry off.

mem0 writes through its own connection pool, outside the test's transaction: every test
uses new users (new UIDs), and nothing relies on a rollback."""

from __future__ import annotations

import io
import os
import re

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.checks import Error
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection

from assistant import checks
from assistant.answering.events import Citations, Done, MemoryUsed, only
from assistant.answering.pipeline import answer_events, start
from assistant.memory import backends, history, service, setup
from assistant.memory.service import (
    MemoryAccessError,
    MemoryInputError,
    MemoryNotFound,
    MemoryUnavailable,
    memories,
)
from providers import registry
from providers.base import ChatResult, ProviderError
from tests.assistant.test_answering import ScriptedChat
from tests.conftest import make_user, token_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

PREFERENCE = "用户喜欢用表格形式的回答"


def add(user, text: str) -> str:
    """A memory stored as it is (no model): the adapter's own path for cards."""
    result = memories()._mem0.add(text, user_id=str(user.uid), metadata={"inferred": False}, infer=False)
    return str(result["results"][0]["id"])


class Extractor:
    """The memory model at the adapter boundary: a fixed output, or an error."""

    model_id = "scripted-memory"

    def __init__(self, output: str = "", error: Exception | None = None) -> None:
        self.output, self.error = output, error
        self.asked: list[list] = []

    def complete(self, messages, *, json_mode=False, max_tokens=512, temperature=0.2) -> ChatResult:
        self.asked.append(messages)
        if self.error:
            raise self.error
        return ChatResult(self.output, self.model_id)


@pytest.fixture
def extractor(monkeypatch) -> Extractor:
    model = Extractor()
    monkeypatch.setitem(registry._instances, "chat", model)
    return model


# -- isolation ------------------------------------------------------------------------------------


def test_another_users_memory_is_never_found_even_with_identical_wording(alice, bob):
    store = memories()
    mine = add(alice, PREFERENCE)
    add(bob, "用户在深圳办公室工作")

    assert [item.id for item in store.search(alice, PREFERENCE)] == [mine]
    for query in (PREFERENCE, "我喜欢什么形式的回答？", "表格"):
        assert mine not in [item.id for item in store.search(bob, query)]
    assert mine not in [item.id for item in store.all(bob)]
    assert all(entry["id"] != mine for entry in store.export(bob)["memories"])
    for action in (
        lambda: store.get(bob, mine),
        lambda: store.history(bob, mine),
        lambda: store.update(bob, mine, "篡改"),
        lambda: store.delete(bob, mine),
    ):
        with pytest.raises(MemoryNotFound):
            action()
    assert store.get(alice, mine).text == PREFERENCE  # untouched
    with pytest.raises(MemoryNotFound):
        store.get(alice, "not-a-uuid")


def test_nothing_is_read_without_a_user(alice):
    store = memories()
    for user in (None, AnonymousUser()):  # None: a caller that lost its user on the way
        with pytest.raises(MemoryAccessError):
            store.search(user, "年假")  # type: ignore[arg-type]
        with pytest.raises(MemoryAccessError):
            store.all(user)  # type: ignore[arg-type]
    raw = store._store
    vector = registry.text_embedder().embed_query("年假")
    with pytest.raises(backends.ScopeError):
        raw.search("年假", vector, 5, None)
    with pytest.raises(backends.ScopeError):
        raw.keyword_search("年假", 5, {"agent_id": "x"})
    with pytest.raises(backends.ScopeError):
        raw.list({}, 10)
    with pytest.raises(backends.ScopeError):
        raw.delete_user("")


# -- Chinese search -------------------------------------------------------------------------------


def test_chinese_memories_are_found_by_their_words(alice):
    store = memories()
    wanted = add(alice, "用户负责西安办公室的法务审核")
    add(alice, "用户下个月要去深圳出差")
    add(alice, "User works on the Falcon project with Maria")

    # Stored with jieba terms, not one unsegmented run of characters (mem0 issue #4884).
    assert {"法务", "审核", "西安"} <= set(store._store.get(wanted).payload["text_lemmatized"].split())
    found = store.search(alice, "法务审核找谁？")
    assert found[0].id == wanted
    assert store.search(alice, "Falcon project status")[0].text.startswith("User works on the Falcon")
    # Nearby in e5's space (0.87) but sharing no word: not about the question.
    assert store.search(alice, "年假怎么申请？") == []


# -- writing memories -----------------------------------------------------------------------------


def test_only_the_users_own_statement_reaches_the_model(alice, extractor):
    extractor.output = '{"memory": [{"id": "0", "text": "用户在西安办公室工作", "attributed_to": "user"}]}'
    remembered = memories().remember(alice, "我在西安办公室工作。年假有几天？", conversation=7)

    assert remembered.inferred
    assert [item.text for item in remembered.items] == ["用户在西安办公室工作"]
    assert remembered.items[0].conversation == 7
    (prompt,) = extractor.asked
    assert prompt[0].content.startswith("你是记忆提取器")  # the portal's short Chinese instructions
    assert "用中文记录" in prompt[-1].content  # the card instructions, as mem0's custom instructions
    said = backends.new_messages(prompt[-1].content)
    assert "我在西安办公室工作" in said
    assert "年假" not in said  # the question is not the user


@pytest.mark.parametrize(
    "question", ["年假有几天？", "我想知道年假有几天？", "I'd like to know how to install it.", "你好，谢谢！"]
)
def test_a_document_question_or_small_talk_stores_nothing_and_asks_no_model(alice, extractor, question):
    remembered = memories().remember(alice, question)
    assert remembered.items == ()
    assert extractor.asked == []
    assert memories().all(alice) == []


def test_extracted_questions_and_inventions_are_dropped(alice, extractor):
    extractor.output = (
        '{"memory": [{"id": "0", "text": "用户询问年假有几天", "attributed_to": "user"},'
        '{"id": "1", "text": "用户希望回答用简短的要点", "attributed_to": "user"},'
        '{"id": "2", "text": "用户在西安办公室工作", "attributed_to": "user"}]}'
    )
    remembered = memories().remember(alice, "我在西安办公室工作。年假有几天？")
    assert [item.text for item in remembered.items] == ["用户在西安办公室工作"]


def test_when_every_extracted_memory_is_dropped_the_users_words_are_kept(alice, extractor):
    extractor.output = '{"memory": [{"id": "0", "text": "用户询问年假有几天", "attributed_to": "user"}]}'
    (card,) = memories().remember(alice, "我在西安办公室工作。年假有几天？").items
    assert card.text == "用户说：我在西安办公室工作。"
    assert not card.inferred


@pytest.mark.parametrize(
    "model",
    [
        Extractor("这不是 JSON，只是一段话"),
        Extractor('{"facts": ["x"]}'),
        Extractor(error=ProviderError("chat", "x", "down")),
    ],
)
def test_the_users_words_are_stored_as_they_are_when_the_model_cannot_extract(alice, monkeypatch, model):
    monkeypatch.setitem(registry._instances, "chat", model)
    store = memories()
    remembered = store.remember(alice, "我负责西安办公室的报销审核。报销要多久？", conversation=3, message=9)

    assert not remembered.inferred
    (card,) = remembered.items
    assert card.text == "用户说：我负责西安办公室的报销审核。"
    assert (card.conversation, card.message, card.inferred) == (3, 9, False)
    assert store.remember(alice, "我负责西安办公室的报销审核。").items == ()  # no duplicate card
    assert [item.id for item in store.all(alice)] == [card.id]


def test_an_english_statement_makes_an_english_card(alice, extractor):
    extractor.output = "nonsense"
    (card,) = memories().remember(alice, "I work in the Berlin office. How long do refunds take?").items
    assert card.text == "User said: I work in the Berlin office."


def test_a_forget_deletes_what_it_names_and_nothing_else(alice, extractor):
    store = memories()
    tables = add(alice, PREFERENCE)
    office = add(alice, "用户在西安办公室工作")

    remembered = store.remember(alice, "忘掉我喜欢表格。")
    assert remembered.deleted == (tables,)
    assert extractor.asked == []  # a forget needs no model
    assert [item.id for item in store.all(alice)] == [office]
    assert [entry["event"] for entry in store._mem0.history(tables)] == ["ADD", "DELETE"]


def test_a_correction_that_names_the_old_value_updates_that_memory(alice, extractor):
    store = memories()
    office = add(alice, "用户在西安办公室工作")
    tables = add(alice, PREFERENCE)
    extractor.output = '{"memory": [{"id": "0", "text": "用户调到杭州工作", "attributed_to": "user"}]}'

    remembered = store.remember(alice, "我从西安调到杭州了。")
    assert remembered.updated == (office,)
    assert len(extractor.asked) == 1  # the old value is named: no second model call
    assert sorted(item.text for item in store.all(alice)) == sorted(["用户调到杭州工作", PREFERENCE])
    assert store.get(alice, office).text == "用户调到杭州工作"
    assert [(entry["event"], entry["old"]) for entry in store.history(alice, office)][-1] == (
        "UPDATE",
        "用户在西安办公室工作",
    )
    assert store.get(alice, tables).text == PREFERENCE


def test_a_correction_without_the_old_value_asks_the_model_which_one_it_replaces(alice, monkeypatch):
    store = memories()
    role = add(alice, "用户是开发工程师")
    add(alice, PREFERENCE)
    outputs = iter(
        ['{"memory": [{"id": "0", "text": "用户是测试工程师", "attributed_to": "user"}]}', '{"outdated": [1]}']
    )

    class Model(Extractor):
        def complete(self, messages, **kwargs):
            self.asked.append(messages)
            return ChatResult(next(outputs), self.model_id)

    model = Model()
    monkeypatch.setitem(registry._instances, "chat", model)
    remembered = store.remember(alice, "不对，我是测试工程师。")
    assert len(model.asked) == 2
    assert "用户是开发工程师" in model.asked[1][-1].content
    assert remembered.updated == (role,)
    assert store.get(alice, role).text == "用户是测试工程师"
    assert len(store.all(alice)) == 2


# -- control: REST --------------------------------------------------------------------------------


def test_edit_delete_export_round_trip_over_rest(api, alice):
    token_for(api, alice)
    first = add(alice, "用户喜欢喝咖啡")
    second = add(alice, PREFERENCE)

    listed = api.get("/api/memories/").json()
    assert listed["count"] == 2
    assert {row["id"] for row in listed["results"]} == {first, second}
    assert api.get("/api/memories/", {"q": "表格形式"}).json()["results"][0]["id"] == second

    edited = api.patch(f"/api/memories/{first}/", {"text": "用户喜欢喝绿茶"}, format="json")
    assert edited.status_code == 200, edited.content
    assert api.get(f"/api/memories/{first}/").json()["text"] == "用户喜欢喝绿茶"
    history = api.get(f"/api/memories/{first}/history/").json()
    assert [(change["event"], change["old"], change["new"]) for change in history] == [
        ("ADD", None, "用户喜欢喝咖啡"),
        ("UPDATE", "用户喜欢喝咖啡", "用户喜欢喝绿茶"),
    ]
    assert api.patch(f"/api/memories/{first}/", {"text": "  "}, format="json").status_code == 400
    assert api.get(f"/api/memories/{first}/").json()["text"] == "用户喜欢喝绿茶"  # a bad edit loses nothing

    exported = api.get("/api/memories/export/")
    assert exported["Content-Disposition"] == 'attachment; filename="memories.json"'
    dump = exported.json()
    assert dump["user"] == str(alice.uid)
    assert {entry["text"] for entry in dump["memories"]} == {"用户喜欢喝绿茶", PREFERENCE}
    assert [len(entry["history"]) for entry in dump["memories"] if entry["id"] == first] == [2]

    assert api.delete(f"/api/memories/{first}/").status_code == 204
    assert api.get(f"/api/memories/{first}/").status_code == 404
    assert memories()._mem0.history(first) == []  # the old text is not kept in mem0's history either
    assert api.post("/api/memories/delete-all/").json() == {"deleted": 1}
    assert api.get("/api/memories/").json()["count"] == 0
    assert memories()._mem0.history(second) == []


def test_another_users_memory_ids_are_404_over_rest(api, alice, bob):
    theirs = add(alice, PREFERENCE)
    token_for(api, bob)
    for response in (
        api.get(f"/api/memories/{theirs}/"),
        api.get(f"/api/memories/{theirs}/history/"),
        api.patch(f"/api/memories/{theirs}/", {"text": "x"}, format="json"),
        api.delete(f"/api/memories/{theirs}/"),
    ):
        assert response.status_code == 404
    assert api.get("/api/memories/", {"q": PREFERENCE}).json()["results"] == []
    assert api.get("/api/memories/export/").json()["memories"] == []
    assert api.post("/api/memories/delete-all/").json() == {"deleted": 0}
    assert memories().get(alice, theirs).text == PREFERENCE


def test_memory_api_needs_a_signed_in_user(api):
    assert api.get("/api/memories/").status_code in (401, 403)


# -- deleted users, admins --------------------------------------------------------------------------


def test_deleting_a_user_deletes_their_memories(django_capture_on_commit_callbacks, bob):
    carol = make_user("carol")
    add(carol, PREFERENCE)
    kept = add(bob, PREFERENCE)
    with django_capture_on_commit_callbacks(execute=True):
        carol.delete()
    assert memories()._store.list({"user_id": str(carol.uid)}, 10) == [[]]
    assert [item.id for item in memories().all(bob)] == [kept]


def test_a_user_is_forgotten_with_memory_turned_off(settings, bob):
    carol = make_user("carol")
    add(carol, PREFERENCE)
    settings.MEMORY_ENABLED = False
    service.close()  # this process's service is built again on next use, and cannot be now
    with pytest.raises(MemoryUnavailable):
        setup.build()
    assert service.forget_user(str(carol.uid)) == 1  # through Django's connection: in this test's transaction
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memory_mem0 WHERE payload->>'user_id' = %s", [str(carol.uid)])
        assert cursor.fetchone() == (0,)


# -- answers --------------------------------------------------------------------------------------


def test_answers_use_the_askers_memories_only(policies, alice, bob):
    mine = add(alice, PREFERENCE)
    model = ScriptedChat(answer="好的，用表格回答。")

    def used(user) -> list[dict]:
        session = start(user, "我喜欢什么形式的回答？", collection_ids=None)
        (event,) = only(answer_events(session, model=model), MemoryUsed)
        return event.memories

    assert [memory["id"] for memory in used(alice)] == [mine]
    assert model.asked[-1][0] == "answer"
    assert PREFERENCE in model.asked[-1][1]  # given to the model as what it remembers
    asked_before = len(model.asked)
    assert used(bob) == []
    assert all(PREFERENCE not in asked for _kind, asked in model.asked[asked_before:])


def test_a_question_only_memory_can_answer_is_answered_from_memory():
    carol = make_user("carol")  # no collections: no passages at all
    add(carol, PREFERENCE)
    model = ScriptedChat(answer="你之前提到，你喜欢用表格形式的回答。")
    events = list(answer_events(start(carol, "我喜欢什么形式的回答？"), model=model))

    kind, prompt = model.asked[-1]
    assert kind == "answer"
    assert PREFERENCE in prompt
    assert "没有找到相关资料" in prompt
    assert events[-1].type == "done"
    assert only(events, Done)[-1].abstain is False
    assert [e.citations for e in only(events, Citations)] == [[]]


def test_answers_go_on_when_memory_fails(policies, alice, monkeypatch):
    def broken() -> service.Memories:
        raise MemoryUnavailable("test: the memory table is unreachable")

    monkeypatch.setattr("assistant.answering.pipeline.memories", broken)
    session = start(alice, "未休完的年假可以累积吗？", collection_ids=[policies.pk])
    kinds = [event.type for event in answer_events(session, model=ScriptedChat())]
    assert "memory.used" not in kinds
    assert kinds[-1] == "done"


# -- configuration --------------------------------------------------------------------------------


def test_a_memory_table_of_another_size_is_a_clear_startup_error(settings):
    settings.MEMORY_TABLE = "memory_dims_probe"
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE memory_dims_probe (id uuid PRIMARY KEY, vector vector(8), payload jsonb)")
    with pytest.raises(MemoryUnavailable, match=r"holds 8-dimensional vectors but the embedding model .* gives 384"):
        setup.check_dims()
    with pytest.raises(MemoryUnavailable, match="8-dimensional"):
        setup.build()
    (problem,) = checks.check_memory_dims(databases=["default"])
    assert isinstance(problem, Error)
    assert problem.id == "assistant.E001"
    with pytest.raises(SystemCheckError, match=r"assistant\.E001"):
        call_command("check", databases=["default"])


def test_memory_is_configured_inside_the_portal_and_never_phones_home(settings):
    from mem0.memory import telemetry

    assert telemetry.MEM0_TELEMETRY is False
    assert os.environ["MEM0_DIR"] == str(settings.MEM0_DIR)
    mem0 = memories()._mem0
    assert isinstance(mem0.db, history.PostgresHistory)  # mem0's history in the portal's database
    assert not (settings.MEM0_DIR / "history.db").exists()
    assert isinstance(mem0.vector_store, backends.PortalPGVector)
    assert isinstance(mem0.embedding_model, backends.PortalEmbedding)
    assert isinstance(mem0.llm, backends.PortalLLM)
    assert mem0.vector_store.embedding_model_dims == registry.text_embedder().dims
    assert re.search(r"dbname=test_", mem0.vector_store.connection_pool.conninfo)  # the portal's own database


def test_edits_are_checked(alice):
    mine = add(alice, PREFERENCE)
    with pytest.raises(MemoryInputError):
        memories().update(alice, mine, "")
    with pytest.raises(MemoryInputError):
        memories().update(alice, mine, "长" * 2001)


def test_a_long_memory_list_is_read_a_page_at_a_time(api, alice, bob):
    texts = [f"用户的第 {n} 条记忆" for n in range(5)]
    for text in texts:
        add(alice, text)
    add(bob, "bob 的记忆")
    listing = memories().listing(alice)
    assert len(listing) == 5
    assert [item.text for item in listing[1:3]] == [texts[3], texts[2]]  # newest first
    token_for(api, alice)
    body = api.get("/api/memories/", {"limit": 2, "offset": 1}).json()
    assert body["count"] == 5
    assert [row["text"] for row in body["results"]] == [texts[3], texts[2]]


def test_manage_py_chat_shows_the_memories_it_used(monkeypatch):
    import io

    carol = make_user("carol")
    add(carol, PREFERENCE)
    monkeypatch.setitem(registry._instances, "chat", ScriptedChat(answer="你喜欢表格。"))
    out = io.StringIO()
    call_command("chat", user=carol.email, questions=["我喜欢什么形式的回答？"], stdout=out)
    assert f"[memory] {PREFERENCE}" in out.getvalue()


def test_a_turn_is_remembered_after_the_database_refused_a_connection(alice, monkeypatch, extractor):
    """bench/load.py lost a memory card to PostgreSQL's 'too many clients'; the task retries."""
    from django.db import OperationalError

    from assistant.models import Conversation, Message
    from assistant.tasks import remember_turn

    conversation = Conversation.objects.create(user=alice, title="tables")
    Message.objects.create(conversation=conversation, role="user", content="以后请用表格形式回答。")
    answer = Message.objects.create(conversation=conversation, role="assistant", content="好的，以后用表格。")
    real, calls = service.Memories.remember, []

    def refused_once(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("sorry, too many clients already")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(service.Memories, "remember", refused_once)
    extractor.output = '{"memory": [{"id": "0", "text": "用户希望以后用表格形式回答", "attributed_to": "user"}]}'
    # Eagerly applied, a retry runs again at once (a worker waits 5 s first).
    remember_turn.apply(args=(answer.pk,))
    assert len(calls) == 2
    assert [item.text for item in memories().all(alice)] == ["用户希望以后用表格形式回答"]


def test_tidy_memories_removes_stored_questions_and_cards_only_with_delete(alice, bob):
    store = memories()
    keep = add(alice, PREFERENCE)
    asked = add(alice, "用户询问年假有几天")
    card = add(bob, "问：报销要多久？\n答：报销五个工作日内到账。")
    english = add(bob, "User asks how to install the agent on Windows")
    theirs = add(bob, "User works in the Berlin office")

    out = io.StringIO()
    call_command("tidy_memories", stdout=out)
    assert "stored memories are questions, not facts about their user" in out.getvalue()
    assert {row[0] for row in store.questions()} >= {asked, card, english}
    assert keep in {item.id for item in store.all(alice)}  # counting deletes nothing
    assert asked in {item.id for item in store.all(alice)}

    call_command("tidy_memories", "--delete", stdout=io.StringIO())
    assert [item.id for item in store.all(alice)] == [keep]
    assert [item.id for item in store.all(bob)] == [theirs]
    assert [entry["event"] for entry in store._mem0.history(asked)] == ["ADD", "DELETE"]
