"""mem0's history in the portal's PostgreSQL (assistant.memory.history): written and read
through mem0's own calls, the same from another Memory and another connection, erased by a
purge, no SQLite file; and the one-time import of an old history.db made by mem0's own
SQLiteManager (idempotent, automatic at the first build, and by `manage.py memory`).

mem0 writes through its own connection pool, outside the test's transaction: every test
uses new users and new memory ids, and nothing relies on a rollback."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from mem0.memory.storage import SQLiteManager

from assistant.memory import history, service, setup
from assistant.memory.service import MemoryUnavailable, memories
from assistant.models import MemoryHistory, MemoryMessage
from providers import registry
from tests.assistant.test_memory import PREFERENCE, Extractor, add

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]


@pytest.fixture
def extractor(monkeypatch) -> Extractor:
    """The memory model, scripted: extracts nothing (mem0 still keeps the messages)."""
    model = Extractor(json.dumps({"memory": []}))
    monkeypatch.setitem(registry._instances, "chat", model)
    return model


def rows_of(memory_id: str) -> list[tuple[str, str | None, str | None]]:
    """The memory's history as another connection (the test's own) reads it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT event, old_memory, new_memory FROM memory_history WHERE memory_id = %s ORDER BY recorded_at",
            [memory_id],
        )
        return list(cursor.fetchall())


def test_the_tables_are_the_models_tables():
    assert MemoryHistory._meta.db_table == history.HISTORY_TABLE
    assert MemoryMessage._meta.db_table == history.MESSAGES_TABLE


def test_add_update_delete_are_recorded_in_postgresql_and_read_back_by_mem0(alice, settings):
    mem0 = memories()._mem0
    assert isinstance(mem0.db, history.PostgresHistory)
    memory_id = add(alice, PREFERENCE)
    mem0.update(memory_id, text="用户喜欢简短的回答")
    mem0.delete(memory_id)

    changes = mem0.history(memory_id)
    assert [c["event"] for c in changes] == ["ADD", "UPDATE", "DELETE"]
    assert [(c["old_memory"], c["new_memory"]) for c in changes] == [
        (None, PREFERENCE),
        (PREFERENCE, "用户喜欢简短的回答"),
        ("用户喜欢简短的回答", None),
    ]
    assert [c["is_deleted"] for c in changes] == [False, False, True]
    assert all(c["memory_id"] == memory_id and c["created_at"] for c in changes)
    assert changes[0]["updated_at"] <= changes[1]["updated_at"] <= changes[2]["updated_at"]
    assert rows_of(memory_id) == [(c["event"], c["old_memory"], c["new_memory"]) for c in changes]
    assert not (settings.MEM0_DIR / "history.db").exists()


def test_a_history_written_by_one_memory_is_read_by_another_and_by_another_process(alice):
    memory_id = add(alice, PREFERENCE)
    memories().update(alice, memory_id, "用户喜欢带表格的简短回答")

    other = setup.build()  # another process's mem0: its own pool, nothing shared in memory
    try:
        assert other.db is not memories()._mem0.db
        assert [c["event"] for c in other.db.get_history(memory_id)] == ["ADD", "UPDATE"]
    finally:
        other.vector_store.close()
        other.close()
    script = (
        "import json, sys, psycopg\n"
        "with psycopg.connect(sys.argv[1]) as db:\n"
        "    rows = db.execute('SELECT event, new_memory FROM memory_history WHERE memory_id = %s "
        "ORDER BY recorded_at', [sys.argv[2]]).fetchall()\n"
        "print(json.dumps(rows, ensure_ascii=False))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, setup.conninfo(), memory_id], capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == [["ADD", PREFERENCE], ["UPDATE", "用户喜欢带表格的简短回答"]]


def test_web_threads_write_one_history_at_once():
    """Requests in threads share the process's mem0: its history takes them all at once."""
    db = memories()._mem0.db
    ids = [str(uuid.uuid4()) for _ in range(8)]
    scope = f"user_id={uuid.uuid4()}"

    def write(memory_id: str) -> None:
        for n in range(5):
            db.add_history(memory_id, None, f"第 {n} 次", "ADD" if n == 0 else "UPDATE", updated_at=f"2026-01-0{n + 1}")
            db.save_messages([{"role": "user", "content": f"{memory_id} {n}"}], scope)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(write, ids))
    for memory_id in ids:
        assert [c["new_memory"] for c in db.get_history(memory_id)] == [f"第 {n} 次" for n in range(5)]
    assert len(db.get_last_messages(scope, limit=100)) == 10


def test_the_service_shows_the_history_to_the_owner_only(alice, bob):
    memory_id = add(alice, PREFERENCE)
    memories().update(alice, memory_id, "用户喜欢简短的回答")
    assert [c["event"] for c in memories().history(alice, memory_id)] == ["ADD", "UPDATE"]
    with pytest.raises(service.MemoryNotFound):
        memories().history(bob, memory_id)


def test_mem0s_copy_of_the_last_messages_is_kept_per_scope_ten_at_most(alice, extractor):
    mem0 = memories()._mem0
    scope = f"user_id={alice.uid}"
    for n in range(12):
        mem0.add([{"role": "user", "content": f"第 {n} 句话"}], user_id=str(alice.uid))
    last = mem0.db.get_last_messages(scope)
    assert [m["content"] for m in last] == [f"第 {n} 句话" for n in range(2, 12)]  # oldest first
    assert MemoryMessage.objects.filter(session_scope=scope).count() == 10
    assert [m["content"] for m in mem0.db.get_last_messages(scope, limit=2)] == ["第 10 句话", "第 11 句话"]


def test_deleting_a_memory_or_everything_erases_its_history_and_messages(alice, bob, extractor):
    mem0 = memories()._mem0
    one, two = add(alice, PREFERENCE), add(alice, "用户在西安办公室工作")
    kept = add(bob, "bob 的记忆")
    mem0.add([{"role": "user", "content": "你好"}], user_id=str(alice.uid))
    assert MemoryMessage.objects.filter(session_scope=f"user_id={alice.uid}").exists()

    memories().delete(alice, one)
    assert rows_of(one) == []  # the service's delete takes the old text with it
    assert memories().delete_all(alice) == 1
    assert rows_of(two) == []
    assert not MemoryMessage.objects.filter(session_scope=f"user_id={alice.uid}").exists()
    assert [event for event, _old, _new in rows_of(kept)] == ["ADD"]


def test_a_deleted_users_history_goes_with_memory_off_too(alice, bob, monkeypatch):
    mine, theirs = add(alice, PREFERENCE), add(bob, "bob 的记忆")

    def off() -> service.Memories:
        raise MemoryUnavailable("test: memory is off")

    monkeypatch.setattr(service, "memories", off)
    assert service.forget_user(str(alice.uid)) == 1
    assert rows_of(mine) == []
    assert [event for event, _old, _new in rows_of(theirs)] == ["ADD"]


def test_mem0s_reset_keeps_the_history_in_postgresql(settings):
    settings.MEMORY_TABLE = f"memory_reset_{uuid.uuid4().hex[:8]}"  # reset drops its own table only
    mem0 = setup.build()
    try:
        mem0.db.add_history(str(uuid.uuid4()), None, "旧的", "ADD")
        mem0.reset()
        assert isinstance(mem0.db, history.PostgresHistory)
        assert not MemoryHistory.objects.filter(new_memory="旧的").exists()
        assert not (settings.MEM0_DIR / "history.db").exists()
    finally:
        mem0.vector_store.close()
        mem0.close()


# -- the one-time import of mem0's SQLite history ------------------------------------------------


@pytest.fixture
def old_history(settings, tmp_path):
    """A history.db as mem0 2.2.1 made it (its own SQLiteManager), in the test's MEM0_DIR."""
    settings.MEM0_DIR = tmp_path / "mem0"
    settings.MEM0_DIR.mkdir()
    path = settings.MEM0_DIR / "history.db"
    ids = [str(uuid.uuid4()), str(uuid.uuid4())]
    scope = f"user_id={uuid.uuid4()}"
    db = SQLiteManager(str(path))
    db.add_history(ids[0], None, "用户在西安办公室工作", "ADD", created_at="2026-01-05T08:00:00+00:00")
    db.add_history(
        ids[0],
        "用户在西安办公室工作",
        "用户在深圳办公室工作",
        "UPDATE",
        created_at="2026-01-05T08:00:00+00:00",
        updated_at="2026-02-01T09:30:00+00:00",
    )
    db.add_history(ids[1], None, "用户喜欢表格", "ADD", created_at="2026-01-06T08:00:00+00:00")
    db.save_messages([{"role": "user", "content": "我在深圳办公室工作"}], scope)
    db.close()
    return path, ids, scope


def imported_rows(ids: list[str]) -> list[tuple[str, str, str | None]]:
    return list(
        MemoryHistory.objects.filter(memory_id__in=ids)
        .order_by("memory_id", "recorded_at")
        .values_list("memory_id", "event", "new_memory")
    )


def test_an_old_sqlite_history_is_imported_once_by_the_command(old_history, capsys):
    path, ids, scope = old_history
    call_command("memory", "--import-sqlite-history")
    assert "Imported 3 changes and 1 messages" in capsys.readouterr().out
    assert not path.exists()
    assert path.with_name("history.db.imported").exists()

    shutil.copy(path.with_name("history.db.imported"), path)  # the same file again: nothing new
    call_command("memory", "--import-sqlite-history", str(path))
    assert "Imported 0 changes and 0 messages" in capsys.readouterr().out
    assert len(imported_rows(ids)) == 3
    assert MemoryMessage.objects.filter(session_scope=scope).count() == 1

    changes = memories()._mem0.history(ids[0])  # read back through mem0, as mem0 wrote it
    assert [(c["event"], c["new_memory"], c["updated_at"]) for c in changes] == [
        ("ADD", "用户在西安办公室工作", None),
        ("UPDATE", "用户在深圳办公室工作", "2026-02-01T09:30:00+00:00"),
    ]
    assert memories()._mem0.db.get_last_messages(scope)[0]["content"] == "我在深圳办公室工作"

    call_command("memory", "--import-sqlite-history")
    assert "nothing to import" in capsys.readouterr().out


def test_the_first_build_in_a_process_imports_an_old_history(old_history):
    path, ids, _scope = old_history
    mem0 = setup.build()
    try:
        assert not path.exists()
        assert sorted(event for _id, event, _new in imported_rows(ids)) == ["ADD", "ADD", "UPDATE"]
        assert [c["event"] for c in mem0.history(ids[0])] == ["ADD", "UPDATE"]
    finally:
        mem0.vector_store.close()
        mem0.close()


def test_an_import_of_a_history_from_an_older_mem0_fills_what_it_lacks(settings, tmp_path):
    path = tmp_path / "old.db"
    memory_id = str(uuid.uuid4())
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE history (id TEXT PRIMARY KEY, memory_id TEXT, new_memory TEXT, event TEXT)")
    db.execute("INSERT INTO history VALUES ('not-a-uuid', ?, '旧版本的记忆', 'ADD')", (memory_id,))
    db.commit()
    db.close()
    first = history.import_sqlite(path, setup.conninfo(), rename=False)
    again = history.import_sqlite(path, setup.conninfo(), rename=False)
    assert first is not None
    assert again is not None
    assert (first.history, again.history) == (1, 0)  # the same id again adds nothing
    (row,) = MemoryHistory.objects.filter(memory_id=memory_id)
    assert (row.event, row.new_memory, row.created_at, row.is_deleted) == ("ADD", "旧版本的记忆", None, False)


def test_an_unreadable_old_history_does_not_stop_memory(settings, tmp_path, caplog):
    settings.MEM0_DIR = tmp_path
    (tmp_path / "history.db").write_text("not a database")
    mem0 = setup.build()
    try:
        assert isinstance(mem0.db, history.PostgresHistory)
    finally:
        mem0.vector_store.close()
        mem0.close()
    assert (tmp_path / "history.db").exists()  # left for the command to retry
    assert "could not be moved into PostgreSQL" in caplog.text


def test_a_history_file_that_is_not_sqlite_is_a_readable_error(tmp_path):
    path = tmp_path / "history.db"
    path.write_text("not a database")
    with pytest.raises(CommandError, match=r"Could not import .*history\.db"):
        call_command("memory", "--import-sqlite-history", str(path))
    assert path.exists()  # left for the operator
    with pytest.raises(CommandError, match="--import-sqlite-history"):
        call_command("memory")
