"""``sqlite:///path``: the contract every shared store keeps, plus what is particular to the file."""

import asyncio
import base64
import logging
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from proxy.memory import StoreUnavailable, open_store
from proxy.memory import sqlite as sqlite_store
from proxy.memory.backoff import Backoff
from proxy.memory.groupcommit import Write
from proxy.memory.guarded import GuardedStore
from proxy.memory.sqlite import SqliteStore
from proxy.turns import Turn, call_ids
from tests.support.ci import require_immutable_files
from tests.support.processes import HANG_GUARD, eventually
from tests.support.proxy_fixtures import running_proxy
from tests.support.store_contract import Backend, StoreContract, turn


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def backend(tmp_path: Path):
    clock = Clock()

    async def elapse(seconds: float) -> None:
        clock.now += seconds

    opened = Backend(lambda ttl, max_entries: SqliteStore(str(tmp_path / "memory.db"), ttl, max_entries, clock=clock), elapse)
    yield opened
    await opened.close_all()


class TestSqliteStore(StoreContract):
    pass


async def test_the_file_is_in_wal_mode_with_a_busy_timeout_and_its_directory_is_created(tmp_path: Path) -> None:
    path = tmp_path / "state" / "toolmend" / "memory.db"
    store = open_store(f"sqlite://{path}", 60, 10)
    assert isinstance(store, SqliteStore) and store.backend == "sqlite"
    assert await store.ready()
    assert path.parent.stat().st_mode & 0o777 == 0o700
    db = store._connection()
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    await store.close()


async def test_expired_and_surplus_turns_are_deleted_from_the_file(tmp_path: Path) -> None:
    clock = Clock()
    store = SqliteStore(str(tmp_path / "m.db"), ttl_seconds=10, max_entries=3, clock=clock)
    await store.remember("t", [turn("call_1"), turn("call_2", "call_3")])
    clock.now += 11
    await store.remember("t", [turn(f"call_new{n}") for n in range(5)])
    assert len(store) == 3  # the two expired turns deleted, and of five new ones the oldest two
    db = sqlite3.connect(tmp_path / "m.db")
    assert db.execute("SELECT count(*) FROM calls").fetchone()[0] == 3  # their call ids went with them
    db.close()
    await store.close()


async def test_turns_written_one_at_a_time_past_max_entries_forget_the_oldest_first(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "m.db"), ttl_seconds=60, max_entries=3, clock=Clock())
    everything = [f"call_{n}" for n in range(6)]
    for n in range(6):
        await store.remember("t", [turn(f"call_{n}")])  # one commit each: the bound holds at every commit, not per batch
        assert len(store) == min(n + 1, 3)
        assert sorted(await store.recall("t", everything)) == everything[max(0, n - 2):n + 1]  # the oldest forgotten
    await store.close()


async def test_a_turn_is_gone_the_moment_its_ttl_is_up(tmp_path: Path) -> None:
    clock = Clock()
    store = SqliteStore(str(tmp_path / "m.db"), ttl_seconds=60, max_entries=3, clock=clock)
    await store.remember("t", [turn("call_1")])
    clock.now += 59.5
    assert set(await store.recall("t", ["call_1"])) == {"call_1"}
    clock.now += 0.5  # exactly 60 s after it was remembered
    assert await store.recall("t", ["call_1"]) == {}
    await store.close()


async def test_a_file_that_cannot_be_written_makes_remember_and_ready_say_so(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    store = SqliteStore(str(blocker / "memory.db"), ttl_seconds=10, max_entries=3)
    store.flush_timeout = 0.3
    with pytest.raises(StoreUnavailable, match="the write failed: OperationalError"):
        await store.remember("t", [turn("call_1")])
    assert not await store.flush(0.3)  # the writer keeps the turn and backs off
    with pytest.raises(StoreUnavailable, match="writes are failing"):
        await store.remember("t", [turn("call_2")])  # at once: not waiting for the writer's backoff
    with pytest.raises(sqlite3.OperationalError):
        await store.ready()
    assert set(await store.recall("t", ["call_1", "call_2"])) == {"call_1", "call_2"}  # still pending here
    with pytest.raises(sqlite3.OperationalError):
        await store.recall("t", ["call_elsewhere"])  # the guard turns this into "nothing recalled"
    await store.close()
    assert store.dropped == 2


async def test_a_recall_of_more_ids_than_a_statement_takes_finds_them_and_the_store_stays_up(tmp_path: Path) -> None:
    # SQLite bounds a statement's variables (32,766 by default, 250,000 in Debian's build); one client's
    # huge history must not fail the recall, nor mark the store down for every tenant (issue 10 item 7).
    too_many = sqlite3.connect(":memory:").getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    store = SqliteStore(str(tmp_path / "m.db"), ttl_seconds=60, max_entries=100)
    guarded = GuardedStore(store)
    await store.remember("t", [turn("call_kept")])
    found = await guarded.recall("t", [*(f"call_unsigned{n}" for n in range(too_many)), "call_kept"])
    assert set(found) == {"call_kept"}
    assert guarded.available and guarded.failures == 0
    await guarded.close()


async def test_a_deleted_file_marks_the_store_down_then_a_fresh_file_is_used(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Deleted under an open connection, the file would take every later turn with it, silently (issue 10 item 11).
    path = tmp_path / "m.db"
    store = SqliteStore(str(path), ttl_seconds=60, max_entries=100)
    async with running_proxy(store=store) as proxy:
        guarded = proxy.state.store
        await guarded.remember("t", [turn("call_before")])
        path.unlink()
        with caplog.at_level(logging.WARNING, logger="toolmend"):
            readyz = (await proxy.client.get("/readyz")).json()
        assert readyz["status"] == "degraded" and not guarded.available
        assert "deleted or replaced" in caplog.text
        await eventually(lambda: guarded.available, "the store back on a fresh file")
        await guarded.remember("t", [turn("call_after")])
        assert (await proxy.client.get("/readyz")).json()["status"] == "ready"
    db = sqlite3.connect(path)  # the file at the path is the one written to now
    assert [row[0] for row in db.execute("SELECT call_id FROM calls")] == ["call_after"]
    db.close()


async def test_an_immutable_shm_file_marks_the_store_down_instead_of_crashing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # SQLite maps an -shm it cannot write read-only; a write through it killed the process with SIGBUS.
    require_immutable_files(tmp_path)
    path = tmp_path / "m.db"
    store = SqliteStore(str(path), ttl_seconds=60, max_entries=100)
    guarded = GuardedStore(store, backoff=Backoff(initial=0.05, maximum=0.2))
    await guarded.remember("t", [turn("call_before")])
    shm = tmp_path / "m.db-shm"
    subprocess.run(["chattr", "+i", str(shm)], check=True)
    try:
        with caplog.at_level(logging.WARNING, logger="toolmend"):
            assert await guarded.recall("t", ["call_before"]) == {}
            await guarded.remember("t", [turn("call_during")])
            assert not await store.flush(0)  # kept pending; nothing was written through the read-only map
        assert not guarded.available and "-shm is not writable" in caplog.text
    finally:
        subprocess.run(["chattr", "-i", str(shm)], check=True)
    await eventually(lambda: guarded.available, "the store back once -shm is writable")
    assert set(await guarded.recall("t", ["call_before", "call_during"])) == {"call_before", "call_during"}
    await guarded.close()


# Run in a child process: on the old code the last connection's close checkpointed the WAL through the
# read-only map and the SIGBUS killed the whole process.
IMMUTABLE_SHM_CHILD = """
import asyncio, subprocess, sys, time
from proxy.memory import StoreUnavailable
from proxy.memory import sqlite as sqlite_store
from proxy.memory.sqlite import SqliteStore
from proxy.memory.groupcommit import Write
from tests.support.store_contract import turn

async def main(path):
    store = SqliteStore(path, ttl_seconds=60, max_entries=100)
    await store.write([Write("t", [turn("call_a")], time.time() + 60)])  # the writer thread's connection
    assert set(await store.fetch("t", ["call_a"])) == {"call_a"}  # a reader thread's connection
    subprocess.run(["chattr", "+i", path + "-shm"], check=True)
    for attempt in (store.fetch("t", ["call_a"]), store.write([Write("t", [turn("call_b")], time.time() + 60)])):
        try:
            await attempt
        except StoreUnavailable:
            pass
        else:
            raise AssertionError("used a connection while -shm was not writable")
    await store.disconnect()  # every connection set aside or left open; none closed through the read-only map
    print("survived")

asyncio.run(main(sys.argv[1]))
"""


def test_no_connection_is_closed_through_an_immutable_shm(tmp_path: Path) -> None:
    require_immutable_files(tmp_path)
    path = tmp_path / "m.db"
    repo = Path(__file__).resolve().parents[3]
    try:
        child = subprocess.run([sys.executable, "-c", IMMUTABLE_SHM_CHILD, str(path)], cwd=repo, capture_output=True,
                               text=True, timeout=HANG_GUARD)
    finally:
        subprocess.run(["chattr", "-i", str(path) + "-shm"], capture_output=True)
    assert child.returncode == 0 and "survived" in child.stdout, child.stderr[-2000:]


def _writers(store: SqliteStore) -> list[str]:
    """Spy: the name of the thread each batch is committed on."""
    names: list[str] = []
    real = store._insert

    def insert(*args, **kwargs):
        names.append(threading.current_thread().name)
        return real(*args, **kwargs)

    store._insert = insert  # type: ignore[method-assign]
    return names


async def test_an_answer_alone_is_committed_on_the_event_loop_and_the_batch_that_prunes_by_the_writer(tmp_path: Path) -> None:
    # The hand-off to the writer thread and back cost more than the transaction itself; the loop's connection never
    # waits for a lock and never checkpoints (an fsync on the loop).
    clock = Clock()
    store = SqliteStore(str(tmp_path / "m.db"), ttl_seconds=10, max_entries=100, clock=clock)
    names = _writers(store)
    await store.remember("t", [turn("call_1")])  # the first batch deletes expired turns: the writer thread's
    await store.remember("t", [turn("call_2")])
    await store.remember("t", [turn(f"call_many{n}") for n in range(sqlite_store.INLINE_TURNS + 1)])  # too many
    clock.now += 11
    await store.remember("t", [turn("call_3")])  # due to delete what expired: the writer thread's again
    loop = threading.current_thread().name
    assert names[1] == loop and all(name.startswith("toolmend-sqlite-writer") for name in (names[0], names[2], names[3]))
    assert set(await store.recall("t", ["call_1", "call_2", "call_3"])) == {"call_3"}  # the first two expired
    db = store._connection(store._loop)
    assert db.execute("PRAGMA busy_timeout").fetchone()[0] == 0
    assert db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    await store.close()


async def test_a_batch_of_exactly_the_inline_bound_is_committed_on_the_loop(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "m.db"), ttl_seconds=60, max_entries=100, clock=Clock())
    names = _writers(store)
    await store.remember("t", [turn("call_first")])  # the first batch prunes: the writer thread's
    await store.remember("t", [turn(f"call_{n}") for n in range(sqlite_store.INLINE_TURNS)])
    assert names[1] == threading.current_thread().name
    await store.close()


async def test_while_another_process_holds_the_write_lock_the_writer_thread_waits_for_it_not_the_loop(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "m.db"), ttl_seconds=60, max_entries=100)
    await store.remember("t", [turn("call_1")])
    names = _writers(store)
    loop, in_thread, inside = asyncio.get_running_loop(), asyncio.Event(), threading.Event()
    waiting = store._insert

    def insert_noting_the_thread(*args, **kwargs):
        if threading.current_thread().name.startswith("toolmend-sqlite-writer"):
            inside.set()
            loop.call_soon_threadsafe(in_thread.set)  # runs only if the loop is free while the thread waits
        try:
            return waiting(*args, **kwargs)
        finally:
            inside.clear()

    store._insert = insert_noting_the_thread  # type: ignore[method-assign]
    other = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another worker's transaction
    writing = asyncio.create_task(store.remember("t", [turn("call_2")]))
    await asyncio.wait_for(in_thread.wait(), HANG_GUARD)
    assert inside.is_set() and not writing.done()  # the thread waits for the lock; the loop went on meanwhile
    other.execute("COMMIT")
    await asyncio.wait_for(writing, HANG_GUARD)
    other.close()
    assert names[0] == threading.current_thread().name  # tried on the loop first, once
    assert names[1].startswith("toolmend-sqlite-writer")  # then handed to the thread, which waited for the lock
    assert set(await store.recall("t", ["call_2"])) == {"call_2"}
    await store.close()


async def test_the_writer_thread_checkpoints_what_the_loop_committed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY", 3)
    store = SqliteStore(str(tmp_path / "m.db"), ttl_seconds=60, max_entries=100)
    checkpoints: list[str] = []
    real = store._checkpoint

    def checkpoint() -> None:
        checkpoints.append(threading.current_thread().name)
        real()

    store._checkpoint = checkpoint  # type: ignore[method-assign]
    await store.remember("t", [turn("call_0")])  # the writer's (it prunes), not counted
    for n in range(1, 7):
        await store.remember("t", [turn(f"call_{n}")])
    await eventually(lambda: len(checkpoints) == 2, "two checkpoints")
    assert all(name.startswith("toolmend-sqlite-writer") for name in checkpoints)  # every third commit, off the loop
    await store.close()


async def test_after_a_slow_commit_on_the_loop_the_writer_thread_commits_for_a_while(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                                   caplog: pytest.LogCaptureFixture) -> None:
    # A slow disk made every other client wait through that commit: the next ones go to the thread.
    store = SqliteStore(str(tmp_path / "m.db"), ttl_seconds=60, max_entries=100)
    await store.remember("t", [turn("call_0")])  # the writer's (it prunes)
    names = _writers(store)
    await store.remember("t", [turn("call_1")])
    monkeypatch.setattr(sqlite_store, "SLOW_COMMIT", -1.0)  # every commit counts as slow from now on
    await store.remember("t", [turn("call_2")])  # on the loop, found slow
    await store.remember("t", [turn("call_3")])
    loop = threading.current_thread().name
    assert names[:2] == [loop, loop] and names[2].startswith("toolmend-sqlite-writer")
    assert "the writer thread commits for the next 60 s" in caplog.text
    assert set(await store.recall("t", ["call_1", "call_2", "call_3"])) == {"call_1", "call_2", "call_3"}
    await store.close()


# --- the layout: a row per turn, and the migration from the first layout (a row per call id) -------

# The first layout, as toolmend wrote it before schema versions: PRAGMA user_version 0.
FIRST_LAYOUT = """
CREATE TABLE calls (
    tenant TEXT NOT NULL,
    call_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    expires REAL NOT NULL,
    turn BLOB NOT NULL,
    PRIMARY KEY (tenant, call_id)
) WITHOUT ROWID;
CREATE INDEX calls_by_turn ON calls (seq);
CREATE INDEX calls_by_expiry ON calls (expires);
"""
NOW = Clock().now
# (tenant, seq, expires, turn): one tenant's call id is another's too, and one turn expired.
FIRST_LAYOUT_TURNS = [
    ("tenant-a", 1, NOW + 60, turn("call_1", "call_2", content="a")),
    ("tenant-b", 2, NOW + 60, turn("call_1", content="b")),
    ("tenant-a", 3, NOW - 1, turn("call_expired")),
    ("tenant-b", 4, NOW + 60, turn("call_3", "call_4", content="b2")),
]


def first_layout_file(path: Path, turns: list[tuple[str, int, float, Turn]] = FIRST_LAYOUT_TURNS) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.executescript(FIRST_LAYOUT)
    db.executemany("INSERT INTO calls VALUES (?, ?, ?, ?, ?)",
                   [(tenant, cid, seq, expires, orjson.dumps(remembered))
                    for tenant, seq, expires, remembered in turns for cid in call_ids(remembered)])
    db.close()


async def recalls_the_first_layout_turns(store: SqliteStore) -> None:
    found = await store.recall("tenant-a", ["call_1", "call_2", "call_expired", "call_3"])
    assert found == {"call_1": turn("call_1", "call_2", content="a"), "call_2": turn("call_1", "call_2", content="a")}
    assert found["call_1"] is found["call_2"]  # one turn, parsed once
    assert await store.recall("tenant-b", ["call_1", "call_2", "call_3", "call_4"]) == {
        "call_1": turn("call_1", content="b"), "call_3": turn("call_3", "call_4", content="b2"),
        "call_4": turn("call_3", "call_4", content="b2")}


def schema_of(path: Path) -> tuple[int, int, int]:
    """(user_version, turns rows, calls rows) of the file."""
    db = sqlite3.connect(path)
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        return version, db.execute("SELECT count(*) FROM turns").fetchone()[0], db.execute("SELECT count(*) FROM calls").fetchone()[0]
    finally:
        db.close()


async def test_a_file_of_the_first_layout_is_migrated_on_open_and_every_turn_recalled_under_its_tenant(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Users upgrade with remembered calls in the file: none may be lost, nor cross tenants.
    path = tmp_path / "m.db"
    first_layout_file(path)
    store = SqliteStore(str(path), ttl_seconds=60, max_entries=100, clock=Clock())
    with caplog.at_level(logging.INFO, logger="toolmend"):
        await recalls_the_first_layout_turns(store)
    assert caplog.text.count("migrated") == 1 and "4 turns kept" in caplog.text
    assert schema_of(path) == (sqlite_store.SCHEMA_VERSION, 4, 6)  # each turn once, and each of its ids
    await store.remember("tenant-a", [turn("call_2", content="new")])  # numbered after the migrated turns
    assert await store.recall("tenant-a", ["call_1", "call_2"]) == {"call_1": turn("call_1", "call_2", content="a"),
                                                                    "call_2": turn("call_2", content="new")}
    # The new one added; the expired turn waits, never recalled, for the two written before it (deleted in write order).
    assert len(store) == 5
    await store.close()


async def test_stores_opening_a_first_layout_file_at_once_migrate_it_once_and_lose_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Every worker of a machine opens the file at start; one migrates, the others find it done.
    path = tmp_path / "m.db"
    first_layout_file(path)
    stores = [SqliteStore(str(path), ttl_seconds=60, max_entries=100, clock=Clock()) for _ in range(4)]
    together = threading.Barrier(len(stores))

    def open_connection(store: SqliteStore) -> None:
        together.wait(HANG_GUARD)
        store._connection()

    with caplog.at_level(logging.INFO, logger="toolmend"):
        await asyncio.gather(*(asyncio.to_thread(open_connection, store) for store in stores))
    assert caplog.text.count("migrated") == 1
    assert schema_of(path) == (sqlite_store.SCHEMA_VERSION, 4, 6)
    for store in stores:
        await recalls_the_first_layout_turns(store)
        await store.close()


# Version 2: today's tables, and an index of the turns by expiry time that cost a page of the WAL in every commit.
VERSION_2 = """
CREATE TABLE turns (seq INTEGER PRIMARY KEY, expires REAL NOT NULL, turn BLOB NOT NULL);
CREATE INDEX turns_by_expiry ON turns (expires);
CREATE TABLE calls (tenant TEXT NOT NULL, call_id TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (tenant, call_id)) WITHOUT ROWID;
CREATE INDEX calls_by_turn ON calls (seq);
CREATE TRIGGER turns_unreachable AFTER UPDATE OF seq ON calls
    WHEN NOT EXISTS (SELECT 1 FROM calls WHERE seq = OLD.seq)
    BEGIN DELETE FROM turns WHERE seq = OLD.seq; END;
PRAGMA user_version = 2;
"""


async def test_a_file_of_version_2_loses_its_index_by_expiry_time_and_nothing_else(tmp_path: Path,
                                                                                   caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "m.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.executescript(VERSION_2)
    db.executemany("INSERT INTO turns VALUES (?, ?, ?)", [(seq, expires, orjson.dumps(remembered))
                                                          for _, seq, expires, remembered in FIRST_LAYOUT_TURNS])
    db.executemany("INSERT INTO calls VALUES (?, ?, ?)", [(tenant, cid, seq) for tenant, seq, _, remembered in FIRST_LAYOUT_TURNS
                                                          for cid in call_ids(remembered)])
    db.close()
    store = SqliteStore(str(path), ttl_seconds=60, max_entries=100, clock=Clock())
    with caplog.at_level(logging.INFO, logger="toolmend"):
        await recalls_the_first_layout_turns(store)
    assert "migrated" in caplog.text and "from schema version 2 to 3" in caplog.text
    assert schema_of(path) == (3, 4, 6)
    db = sqlite3.connect(path)
    assert [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")] == ["calls_by_turn"]
    db.close()
    await store.remember("tenant-b", [turn("call_1", content="b again")])  # numbered after the largest, 4
    assert await store.recall("tenant-b", ["call_1"]) == {"call_1": turn("call_1", content="b again")}
    assert seqs_in(path) == [1, 3, 4, 5]  # 2 left without ids; 3 (expired) waits for 1 and 2, written before it
    await store.close()


async def test_a_file_of_a_newer_schema_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE later (what BLOB)")
    db.execute(f"PRAGMA user_version = {sqlite_store.SCHEMA_VERSION + 1}")
    db.close()
    before = path.read_bytes()
    store = SqliteStore(str(path), ttl_seconds=60, max_entries=100)
    with pytest.raises(StoreUnavailable, match=f"{path} was written by a newer toolmend"):
        await store.ready()
    with pytest.raises(StoreUnavailable, match="newer toolmend"):
        await store.recall("t", ["call_1"])
    await store.close()
    assert path.read_bytes() == before and sorted(tmp_path.iterdir()) == [path]  # not even put in WAL mode


async def test_ids_pointed_at_a_newer_turn_recall_it_and_a_turn_left_without_ids_is_deleted(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = SqliteStore(str(path), ttl_seconds=60, max_entries=4, clock=Clock())

    async def contents(*ids: str) -> list[str | None]:
        found = await store.recall("t", list(ids))
        return [found[cid]["content"] for cid in ids]

    await store.remember("t", [turn("call_1", "call_2", content="first")])
    await store.remember("t", [turn("call_2", "call_3", content="second")])
    assert await contents("call_1", "call_2", "call_3") == ["first", "second", "second"]
    await store.remember("t", [turn("call_1", content="third")])  # the first turn's last id moves on
    assert await contents("call_1", "call_2") == ["third", "second"]
    assert schema_of(path)[1:] == (2, 3)  # the first turn, unreachable now, is gone from the file
    await store.remember("t", [turn("call_4", content="fourth"), turn("call_4", "call_5", content="fifth")])  # one batch
    assert await contents("call_4", "call_5") == ["fifth", "fifth"]
    assert schema_of(path)[1:] == (3, 5)
    await store.remember("t", [turn(f"call_{n}") for n in range(6, 10)])
    assert len(store) == 4 and schema_of(path)[1:] == (4, 4)  # max_entries still bounds the turns
    assert set(await store.recall("t", [f"call_{n}" for n in range(1, 10)])) == {"call_6", "call_7", "call_8", "call_9"}
    await store.close()


def seqs_in(path: Path) -> list[int]:
    """The numbers of the turns in the file."""
    db = sqlite3.connect(path)
    try:
        return [seq for (seq,) in db.execute("SELECT seq FROM turns ORDER BY seq")]
    finally:
        db.close()


async def test_no_number_is_used_again_not_even_after_the_newest_turn_expired(tmp_path: Path) -> None:
    # The newest turn can expire unseen: a batch written after the store was down for longer than the ttl. It stays in
    # the file, so the next turn is numbered past it: no id can find a later turn under its old number.
    clock = Clock()
    path = tmp_path / "m.db"
    store = SqliteStore(str(path), ttl_seconds=60, max_entries=100, clock=clock)
    await store.remember("t", [turn("call_old")])
    clock.now += 61
    await store.write([Write("t", [turn("call_late")], clock.now - 1)])  # deletes the expired turn before it
    assert seqs_in(path) == [2]
    await store.remember("t", [turn("call_new")])
    assert seqs_in(path) == [2, 3]
    assert list(await store.recall("t", ["call_old", "call_late", "call_new"])) == ["call_new"]
    clock.now += 1
    await store.remember("t", [turn("call_next")])  # the next deletion of expired turns: a newer one is there now
    assert seqs_in(path) == [3, 4]
    await store.close()


async def test_expired_turns_are_deleted_in_write_order_up_to_the_first_unexpired_one(tmp_path: Path) -> None:
    # No index by expiry time (a page of the WAL in every commit): turns expire nearly in the order they are written.
    clock = Clock()
    path = tmp_path / "m.db"
    store = SqliteStore(str(path), ttl_seconds=10, max_entries=100, clock=clock)
    await store.write([Write("t", [turn("call_1")], clock.now + 5), Write("t", [turn("call_2")], clock.now + 30),
                       Write("t", [turn("call_3")], clock.now + 5), Write("t", [turn("call_4")], clock.now + 30)])
    clock.now += 6
    await store.remember("t", [turn("call_5")])  # due to delete what expired: 1 and 3
    assert seqs_in(path) == [2, 3, 4, 5]  # 3 waits for 2, written before it
    assert set(await store.recall("t", [f"call_{n}" for n in range(1, 6)])) == {"call_2", "call_4", "call_5"}
    clock.now += 25
    await store.remember("t", [turn("call_6")])
    assert seqs_in(path) == [6]
    await store.close()


def traced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Spy: every statement run on the connections opened from now on."""
    statements: list[str] = []
    real = SqliteStore._open

    def opened(store: SqliteStore, loop: bool = False):
        db = real(store, loop)
        db.set_trace_callback(statements.append)
        return db

    monkeypatch.setattr(SqliteStore, "_open", opened)
    return statements


def deletes_beyond_max_entries(statements: list[str]) -> int:
    return sum(statement.startswith("DELETE FROM turns WHERE seq <=") for statement in statements)


async def test_turns_beyond_max_entries_are_deleted_only_once_there_can_be_some_whichever_process_wrote_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two DELETE statements in every commit, though a file that is not full has nothing to delete.
    path = tmp_path / "m.db"
    statements = traced(monkeypatch)
    one, other = (SqliteStore(str(path), ttl_seconds=60, max_entries=5, clock=Clock()) for _ in range(2))
    for n in range(1, 4):
        await one.remember("t", [turn(f"call_{n}")])
    assert deletes_beyond_max_entries(statements) == 0
    await other.remember("t", [turn(f"call_{n}") for n in range(4, 8)])  # another process: turns 1-2 go
    assert seqs_in(path) == [3, 4, 5, 6, 7]
    await one.remember("t", [turn("call_8")])  # this process's connection never saw them go: deletes from there
    assert seqs_in(path) == [4, 5, 6, 7, 8] and len(one) == 5
    assert set(await other.recall("t", [f"call_{n}" for n in range(1, 9)])) == {f"call_{n}" for n in range(4, 9)}
    assert deletes_beyond_max_entries(statements) == 2
    for store in (one, other):
        await store.close()


async def test_ids_remembered_again_keep_one_turn_and_look_for_turns_to_delete_once_per_max_entries_numbers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.db"
    statements = traced(monkeypatch)
    store = SqliteStore(str(path), ttl_seconds=60, max_entries=3, clock=Clock())
    for _ in range(9):
        await store.remember("t", [turn("call_same")])
    assert seqs_in(path) == [9]
    assert deletes_beyond_max_entries(statements) == 2  # at 4 and at 7, which found the file held turns from 4, then 7
    for n in range(10, 14):
        await store.remember("t", [turn(f"call_{n}")])
    assert seqs_in(path) == [11, 12, 13]  # the bound holds from there on
    await store.close()


def responses_turn(n: int) -> Turn:
    """A Responses turn of the usual size (1.5 KB): a reasoning item's encrypted_content and a call, recalled by the call
    and by the response."""
    return {"dialect": "responses", "ids": [f"call_{n}", f"resp_{n}"], "response_id": f"resp_{n}",
            "items": [{"type": "reasoning", "id": f"rs_{n}", "summary": [], "encrypted_content": base64.b64encode(os.urandom(900)).decode()},
                      {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": "get_weather",
                       "arguments": '{"city": "Paris", "unit": "celsius"}', "status": "completed"}]}


async def test_a_turn_is_stored_once_not_on_an_overflow_page_per_call_id(tmp_path: Path) -> None:
    # A whole turn in a WITHOUT ROWID row per call id took at least a 4 KiB overflow page per id: 9.2 KiB a turn.
    path = tmp_path / "m.db"
    store = SqliteStore(str(path), ttl_seconds=60, max_entries=10_000)
    for start in range(0, 2000, 100):
        await store.remember("t", [responses_turn(n) for n in range(start, start + 100)])
    assert set(await store.recall("t", ["call_0", "resp_1999"])) == {"call_0", "resp_1999"}
    await store.close()  # the last connection checkpoints the WAL into the file
    assert path.stat().st_size < 2000 * 4096  # under a page a turn: 2.1 KiB, where the first layout took 9.2


async def test_a_migrated_file_gives_back_the_pages_of_the_first_layout(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    turns = 100
    first_layout_file(path, [("t", n, NOW + 60, responses_turn(n)) for n in range(1, turns + 1)])
    assert path.stat().st_size > turns * 8192  # two overflow pages a turn
    store = SqliteStore(str(path), ttl_seconds=60, max_entries=1000, clock=Clock())
    assert set(await store.recall("t", ["call_1", f"resp_{turns}"])) == {"call_1", f"resp_{turns}"}
    await store.close()
    assert path.stat().st_size < turns * 4096
