"""``sqlite:///path/to/memory.db``: one file shared by every worker of a machine, kept across restarts.

The embedded default. The file is in WAL mode, so readers never wait for the writer. The group commit
(``proxy.memory.groupcommit``) hands over batches, each committed in one transaction. A small batch (at most
``INLINE_TURNS`` turns, the usual one of an answer that ended alone) is committed on the event loop itself: a
transaction of a few rows costs less than the hand-off to a thread and back, in CPU and in the time the answer
waits (read your writes). That connection never waits: it tries the write lock once (no busy timeout), and when
another process holds it the batch goes to the writer thread. It never checkpoints either (no fsync on the loop):
every ``CHECKPOINT_EVERY`` commits the writer thread runs a passive checkpoint. A commit on the loop slower than
``SLOW_COMMIT`` (a slow disk) hands the writes of the next ``SLOW_DISK_BACKOFF`` seconds to the writer thread; a
file system that hangs outright holds the loop for the one commit that meets it. Larger batches, and the one that
deletes expired turns, go to the writer thread, whose connection waits up to ``BUSY_TIMEOUT_MS`` for another
process's write lock. Recalls run on a small pool of reader threads. ``synchronous=NORMAL``: a committed turn
survives the process stopping or crashing (not a power cut of the machine before the next checkpoint).

Two tables. ``turns`` holds each turn once, under its number ``seq`` (the rowid); ``calls`` maps (tenant,
call id) to that number, ``WITHOUT ROWID``, so a recall is one indexed query (a join) per ``RECALL_BATCH``
ids. Turns are numbered as they are written, by SQLite (one past the largest number in the table, under the
write lock, so across processes). Remembering a call id again points it at the new turn; a turn left with no id
pointing at it can never be recalled again, and a trigger deletes it in that same statement (one indexed
look-up, and only when an id moves), so re-remembering the same ids keeps one turn, not one per answer. No
number is used again: the newest turn is never deleted (expired, it stays, never returned, until a newer one
is written), so the largest number only grows, as AUTOINCREMENT would have it without its page more in every
commit. A turn's ``calls`` rows are deleted in the transaction that deletes it.

Why not one table: the first layout kept the whole turn (1-2 KB: a Responses turn carries its reasoning's
``encrypted_content``) in a ``WITHOUT ROWID`` row per call id, which SQLite moves to overflow pages: at least a 4
KB page per call id, so the file took about four times the space and commits were slower (the sizes are in
docs/performance.md).

The layout's version is the file's ``PRAGMA user_version``: ``SCHEMA_VERSION``, or 0 for the first layout (a
``calls`` table with a ``turn`` column), or 2 for this one with an index of the turns by expiry time too, which
cost a page of the WAL in every commit: opening a version-2 file drops it (its pages go to the free list, for new
turns). Opening a first-layout file migrates it in one transaction, under the write lock and with the version
checked again inside it (every worker opens the file at once: one migrates, and the others wait for it, up to
``BUSY_TIMEOUT_MS``, past which the store counts as unavailable until they find it done), keeping every turn with
its number, tenant, ids and the latest of its expiry times; then a ``VACUUM`` gives back the pages the old table
left free, and the log says how many turns were kept. A file of a newer version, written by a newer toolmend, is
never written to: ``StoreUnavailable`` says so.

Bounds: a turn expires ``ttl_seconds`` after it was last remembered, and only the newest ``max_entries`` turns
are kept. Expired turns are never returned (a recall asks for unexpired ones), and the writer thread deletes
them at most once a second, in write order: from the oldest turn up to the first unexpired one, without an index
by expiry time. Turns expire nearly in the order they were written (every worker has the same ``ttl_seconds``,
and remembers a turn a moment before its batch is written), but not where processes have different
``ttl_seconds``, the clock stepped back, or in a migrated file: there an expired turn waits in the file, never
returned, until the turns written before it expire too, or ``max_entries`` deletes it. The turns beyond
``max_entries`` are deleted by the batch that adds them, which skips the two ``DELETE`` statements while the
file cannot hold any: each connection knows a number no turn in the file is below (what it saw deleted stays
deleted, as the numbers only grow), and deletes only once the newest turn is ``max_entries`` past it. A full
file deletes in every batch; one that holds fewer turns than numbers were used (ids remembered again
replace their turns) looks at most once per ``max_entries`` numbers.

Faults of the file itself are checked before every use of a connection (an ``access`` and a ``stat`` call while
the ``-shm`` file is writable), and raise ``StoreUnavailable``, which the guard reports (log line,
``x-toolmend-memory: unavailable``, ``/readyz``):

- the file was deleted or replaced under an open connection (which would otherwise go on writing to a file
  nobody can open again): the connection is closed, and the next use opens the file at the path afresh;
- the ``-shm`` file (the WAL index, which every connection maps into memory) is not writable, e.g.
  immutable: SQLite would map it read-only, and a write through the mapping, or another process
  shrinking it, kills the process with SIGBUS. None is opened until it is writable again, and the open
  ones are parked, not closed: closing the last connection checkpoints the WAL, which writes through that
  mapping. Parked connections are closed once the file is writable again; at shutdown, if it still is not,
  they are left open for the operating system to drop with the process.
"""

import asyncio
import ctypes
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson

from proxy.memory.groupcommit import GroupCommitStore, Write
from proxy.memory.protocol import StoreUnavailable
from proxy.turns import Turn, call_ids

log = logging.getLogger("toolmend")

BUSY_TIMEOUT_MS = 5000
READER_THREADS = 2
#: Most turns a batch may hold to be committed on the event loop rather than by the writer thread.
INLINE_TURNS = 16
#: Commits on the event loop between two passive checkpoints, which the writer thread runs (SQLite's own
#: automatic checkpoint would run on the loop: an fsync). A commit of one turn adds about three pages to the WAL:
#: about SQLite's own 1,000 pages between checkpoints.
CHECKPOINT_EVERY = 300
#: A commit on the event loop slower than this (a slow or stalling disk: every other client waited through it)
#: sends every batch of the next ``SLOW_DISK_BACKOFF`` seconds to the writer thread.
SLOW_COMMIT = 0.050
SLOW_DISK_BACKOFF = 60.0

#: ``PRAGMA user_version`` of the files this code writes (0: the first layout, or a new file; 2: ``SCHEMA`` with
#: ``turns_by_expiry``, an index of the turns by expiry time).
SCHEMA_VERSION = 3

SCHEMA = (
    """CREATE TABLE turns (
        seq INTEGER PRIMARY KEY,  -- numbered in the order turns were written, across processes; never used again
        expires REAL NOT NULL,
        turn BLOB NOT NULL
    )""",
    """CREATE TABLE calls (
        tenant TEXT NOT NULL,
        call_id TEXT NOT NULL,
        seq INTEGER NOT NULL,  -- the turn it recalls
        PRIMARY KEY (tenant, call_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX calls_by_turn ON calls (seq)",
    """CREATE TRIGGER turns_unreachable AFTER UPDATE OF seq ON calls
        WHEN NOT EXISTS (SELECT 1 FROM calls WHERE seq = OLD.seq)
        BEGIN DELETE FROM turns WHERE seq = OLD.seq; END""",
)
#: A file of the first layout is set aside before ``SCHEMA`` (which takes its names again), then copied into it.
SET_ASIDE_FIRST_LAYOUT = ("DROP INDEX calls_by_turn", "DROP INDEX calls_by_expiry", "ALTER TABLE calls RENAME TO first_layout")
COPY_FIRST_LAYOUT = (
    "INSERT INTO turns (seq, expires, turn) SELECT seq, max(expires), turn FROM first_layout GROUP BY seq",
    "INSERT INTO calls (tenant, call_id, seq) SELECT tenant, call_id, seq FROM first_layout",
    "DROP TABLE first_layout",
)
#: A file of version 2 has ``SCHEMA`` and one index more, which a commit kept up to date for a page of the WAL more.
FROM_VERSION_2 = ("DROP INDEX turns_by_expiry",)

#: Seq NULL: SQLite numbers the turn one past the largest number in the table (under the write lock, so across
#: processes), which is always the newest turn's, as the newest is never deleted (see ``_prune``).
INSERT_TURN = "INSERT INTO turns (seq, expires, turn) VALUES (NULL, ?, ?)"
POINT_CALLS = ("INSERT INTO calls (tenant, call_id, seq) VALUES (?, ?, ?) "
               "ON CONFLICT (tenant, call_id) DO UPDATE SET seq = excluded.seq")
#: The first turn ``_prune`` keeps: the first unexpired one in write order, else the newest.
FIRST_KEPT = ("SELECT coalesce((SELECT seq FROM turns WHERE expires > ? ORDER BY seq LIMIT 1), "
              "(SELECT max(seq) FROM turns))")


class SqliteStore(GroupCommitStore):
    backend = "sqlite"

    def __init__(self, path: str, ttl_seconds: float, max_entries: int, clock: Callable[[], float] = time.time) -> None:
        super().__init__(ttl_seconds, max_entries, clock)
        self.path = path
        self._writer_thread = ThreadPoolExecutor(1, thread_name_prefix="toolmend-sqlite-writer")
        self._reader_threads = ThreadPoolExecutor(READER_THREADS, thread_name_prefix="toolmend-sqlite-reader")
        self._local = threading.local()
        self._loop = _Slot()  # the event loop's own connection: never waits for a lock, never checkpoints
        self._loop_commits = 0
        self._loop_after = float("-inf")  # (monotonic) no commit on the loop before then: one was slow
        self._connections: list[sqlite3.Connection] = []  # every open one, for shutdown
        self._parked: list[sqlite3.Connection] = []  # set aside while -shm was not writable; closed once it is
        self._file: tuple[int, int] | None = None  # (device, inode) of the file the connections have open
        self._lock = threading.Lock()

    async def write(self, batch: list[Write]) -> None:
        small = sum(len(entry.turns) for entry in batch) <= INLINE_TURNS and time.monotonic() >= self._loop_after
        if small and not self.prune_due(self.clock(), claim=False) and self._insert_on_loop(batch):
            return
        await asyncio.get_running_loop().run_in_executor(self._writer_thread, self._insert, batch)

    async def fetch(self, tenant: str, ids: list[str]) -> dict[str, Turn]:
        return await asyncio.get_running_loop().run_in_executor(self._reader_threads, self._select, tenant, ids)

    async def ping(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._reader_threads, self._select, "", [])

    async def disconnect(self) -> None:
        await asyncio.to_thread(self._shutdown)

    def __len__(self) -> int:
        """Turns stored in the file (expired ones included until a batch deletes them)."""
        return self._connection().execute("SELECT count(*) FROM turns").fetchone()[0]

    def _insert_on_loop(self, batch: list[Write]) -> bool:
        """Commit ``batch`` on the event loop; False, nothing written, when another process holds the write lock."""
        started = time.monotonic()
        try:
            self._insert(batch, self._connection(self._loop), prune=False)
        except sqlite3.OperationalError as error:
            if error.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY:  # extended codes too (SQLITE_BUSY_RECOVERY...)
                return False
            raise
        finally:
            took = time.monotonic() - started
            if took > SLOW_COMMIT:
                self._loop_after = started + took + SLOW_DISK_BACKOFF
                log.warning("memory: a commit to %s took %.0f ms on the event loop; the writer thread commits for the next %.0f s",
                            self.path, took * 1000, SLOW_DISK_BACKOFF)
        self._loop_commits += 1
        if self._loop_commits % CHECKPOINT_EVERY == 0:
            self._writer_thread.submit(self._checkpoint)
        return True

    # --- in the threads ----------------------------------------------------------------------------

    def _checkpoint(self) -> None:
        try:
            self._connection().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except (sqlite3.Error, StoreUnavailable) as error:  # the next one, or the writer's own, catches up
            log.warning("memory: checkpoint of %s failed: %s", self.path, error)

    def _insert(self, batch: list[Write], db: "_Connection | None" = None, prune: bool = True) -> None:
        db = db if db is not None else self._connection()
        now = self.clock()
        db.execute("BEGIN IMMEDIATE")  # the write lock first: no other process numbers turns meanwhile
        try:
            newest = self._add(db, batch)
            oldest = db.oldest if newest is None else self._keep_newest(db, newest)
            if prune and self.prune_due(now):
                self._prune(db, now)
            db.execute("COMMIT")
        except BaseException:
            _roll_back(db)
            raise
        db.oldest = oldest  # once committed: a rolled back transaction deleted nothing

    def _add(self, db: sqlite3.Connection, batch: list[Write]) -> int | None:
        """Insert the turns of ``batch`` that have call ids and point their ids at them; the newest one's number."""
        seq, calls = None, []
        for entry in batch:
            for turn in entry.turns:
                ids = call_ids(turn)
                if ids:
                    seq = db.execute(INSERT_TURN, (entry.expires, orjson.dumps(turn))).lastrowid
                    calls += [(entry.tenant, cid, seq) for cid in ids]
        # The turns first: an id of the batch that moves on to a later turn of the batch deletes the one it left.
        db.executemany(POINT_CALLS, calls)
        return seq

    def _keep_newest(self, db: "_Connection", newest: int) -> int:
        """Delete the turns more than ``max_entries`` before ``newest``, if the file can hold any (its turns are
        numbered from ``db.oldest`` on); return what the file's turns are numbered from then. A file that is not
        full runs no ``DELETE``; a full one runs them in every commit."""
        last_gone = newest - self.max_entries
        if last_gone < db.oldest:
            return db.oldest
        # A turn is deleted with its call ids: none may be left pointing at a number no turn has.
        db.execute("DELETE FROM calls WHERE seq <= ?", (last_gone,))
        if db.execute("DELETE FROM turns WHERE seq <= ?", (last_gone,)).rowcount:
            return last_gone + 1
        return db.execute("SELECT min(seq) FROM turns").fetchone()[0]  # the ids moved on: fewer turns than numbers

    def _prune(self, db: sqlite3.Connection, now: float) -> None:
        """Delete the expired turns written before the first unexpired one (in write order, which is nearly the order
        they expire in: see the module's docstring), with their call ids. Never the newest turn, expired or not: the
        next number is one past it."""
        first_kept = db.execute(FIRST_KEPT, (now,)).fetchone()[0]
        if first_kept is not None:
            db.execute("DELETE FROM calls WHERE seq < ?", (first_kept,))
            db.execute("DELETE FROM turns WHERE seq < ?", (first_kept,))

    def _select(self, tenant: str, ids: list[str]) -> dict[str, Turn]:
        db = self._connection()
        if not ids:
            db.execute("SELECT 1 FROM calls LIMIT 1").fetchall()
            return {}
        placeholders = ",".join("?" * len(ids))
        rows = db.execute(
            f"SELECT call_id, seq, turn FROM calls JOIN turns USING (seq) WHERE tenant = ? AND call_id IN ({placeholders}) "
            "AND expires > ?",
            (tenant, *ids, self.clock()),
        ).fetchall()
        found: dict[str, Turn] = {}
        by_seq: dict[int, Turn] = {}  # the ids of one turn share one parsed turn
        for cid, seq, blob in rows:
            if seq not in by_seq:
                by_seq[seq] = orjson.loads(blob)
            found[cid] = by_seq[seq]
        return found

    def _connection(self, slot: "_Slot | threading.local | None" = None) -> "_Connection":
        """This thread's connection (or the event loop's, ``slot``), once the file checks out (see the module's
        docstring)."""
        slot = slot if slot is not None else self._local
        db = getattr(slot, "db", None)
        if not self._shm_writable():
            self._discard(db, slot)
            raise StoreUnavailable(f"{self.path}-shm is not writable (immutable or read-only); SQLite cannot share its WAL index safely")
        if self._parked:
            self._close_parked()
        at_path = _identity(self.path)
        if self._file is not None and at_path != self._file:
            self._file = None  # reported once: the next use adopts the file at the path
            self._discard(db, slot)
            raise StoreUnavailable(f"{self.path} was deleted or replaced while open; turns written to it since are lost, "
                                   "and the file at the path is opened afresh")
        if db is not None and slot.file != at_path:
            self._discard(db, slot)  # another thread found the file replaced and said so
            db = None
        if db is None:
            db = self._open(loop=slot is self._loop)
            slot.db, slot.file = db, _identity(self.path)
            if self._file is None:
                self._file = slot.file
        return db

    def _shm_writable(self) -> bool:
        shm = self.path + "-shm"
        if os.access(shm, os.W_OK):  # the usual case, in one system call
            return True
        return not os.path.exists(shm) or os.access(shm, os.W_OK)  # absent; or created by another connection since

    def _discard(self, db: sqlite3.Connection | None, slot: "_Slot | threading.local") -> None:
        if db is None:
            return
        slot.db = None
        with self._lock:
            self._connections.remove(db)
            if not self._shm_writable():
                self._parked.append(db)  # closing it could checkpoint through the read-only map: SIGBUS
                return
        db.close()

    def _close_parked(self) -> None:
        with self._lock:
            parked, self._parked = self._parked, []
        for db in parked:
            db.close()

    def _open(self, loop: bool = False) -> "_Connection":
        directory = Path(self.path).parent
        if not directory.exists():
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False,
                             factory=_Connection)
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            current = self._version(db) == SCHEMA_VERSION  # checked first: a newer toolmend's file is left as it is
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            if not current:
                self._create_or_migrate(db)
            if loop:  # the event loop's: one try for the write lock, and no checkpoint (see the module's docstring)
                db.execute("PRAGMA busy_timeout = 0")
                db.execute("PRAGMA wal_autocheckpoint = 0")
        except BaseException:
            db.close()
            raise
        with self._lock:
            self._connections.append(db)
        return db

    def _version(self, db: sqlite3.Connection) -> int:
        """The file's schema version; ``StoreUnavailable`` if it is newer than this code's."""
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreUnavailable(f"{self.path} was written by a newer toolmend (schema version {version}, this one knows "
                                   f"up to {SCHEMA_VERSION}); it is left as it is: upgrade toolmend, or use another file")
        return version

    def _create_or_migrate(self, db: sqlite3.Connection) -> None:
        """Give a new file ``SCHEMA``, or migrate one of an earlier version to it (see the module's docstring): once,
        by whichever worker takes the write lock first."""
        db.execute("BEGIN IMMEDIATE")
        try:
            version = self._version(db)
            if version == SCHEMA_VERSION:
                db.execute("COMMIT")  # another worker did it meanwhile
                return
            first_layout = version == 0 and db.execute(
                "SELECT count(*) FROM pragma_table_info('calls') WHERE name = 'turn'").fetchone()[0] > 0
            for statement in _migration(version, first_layout):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            migrated = db.execute("SELECT count(*) FROM turns").fetchone()[0] if first_layout else 0
            db.execute("COMMIT")
        except BaseException:
            _roll_back(db)
            raise
        if first_layout:
            self._compact(db)
            log.info("memory: migrated %s to schema version %d (a row per turn, not per call id): %d turns kept, %.1f MB",
                     self.path, SCHEMA_VERSION, migrated, os.path.getsize(self.path) / 1e6)
        elif version:
            log.info("memory: migrated %s from schema version %d to %d (no index of the turns by expiry time)",
                     self.path, version, SCHEMA_VERSION)

    def _compact(self, db: sqlite3.Connection) -> None:
        """Give back the pages the first layout's table left free: most of the file."""
        try:
            db.execute("VACUUM")
        except sqlite3.Error as error:  # migrated all the same: new turns reuse the free pages
            log.warning("memory: VACUUM of %s after its migration failed (%s); it keeps its size", self.path, error)

    def _shutdown(self) -> None:
        self._writer_thread.shutdown(wait=True)
        self._reader_threads.shutdown(wait=True)
        with self._lock:
            connections = (*self._connections, *self._parked)
            self._connections.clear()
            self._parked.clear()
        if self._shm_writable():
            for db in connections:
                db.close()
        else:
            for db in connections:
                _never_close(db)


class _Connection(sqlite3.Connection):
    """A connection to one file, and the least number a turn in that file can have."""

    #: No turn of the file is numbered below this: numbers only grow (the newest turn is never deleted), so what a
    #: connection saw deleted stays deleted, whichever process writes next. Turns are numbered from 1.
    oldest = 1


class _Slot:
    """Where a connection is kept, as ``threading.local`` keeps each thread's: the event loop's own."""

    db: _Connection | None = None
    file: tuple[int, int] | None = None


def _migration(version: int, first_layout: bool) -> tuple[str, ...]:
    """The statements that bring a file of schema ``version`` (0: new, or of the first layout) to ``SCHEMA``."""
    if version == 2:
        return FROM_VERSION_2
    return (*SET_ASIDE_FIRST_LAYOUT, *SCHEMA, *COPY_FIRST_LAYOUT) if first_layout else SCHEMA


def _roll_back(db: sqlite3.Connection) -> None:
    if db.in_transaction:
        db.execute("ROLLBACK")


def _never_close(db: sqlite3.Connection) -> None:
    """Keep ``db`` open until the process ends, and past the interpreter's own clean-up: closing (the last)
    connection writes to the ``-shm`` map, which is SIGBUS while the file is not writable, and the
    interpreter would close it when it frees the object at exit. An extra reference that is never released
    means it is never freed; the operating system drops it with the process, and SQLite recovers the WAL at
    the next open."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(db))


def _identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``, None if there is none."""
    try:
        found = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return found.st_dev, found.st_ino
