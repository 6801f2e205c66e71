"""Only the committer writes: every writer of memray, driven for real on the fakes, is
watched at the event log's `commit` and the vector store's write methods, and a static
scan of the package finds no other caller of them."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memray import Memory, MemoryConfig
from memray.core.changes import ChangeSet
from memray.core.records import new_record
from memray.embed.hashing import HashingEmbedder
from memray.ingest.logs import LogTurn
from memray.ingest.units import build_unit, unit_texts
from memray.ingest.writer import BackfillWriter
from memray.maintain import writer as maintenance
from memray.maintain.plan import MaintenanceSettings, plan_user
from memray.models import MemoryEvent, utcnow
from memray.store.base import StoredMemory
from memray.store.events import StoreOp, Tombstone
from memray.store.fake import InMemoryStore
from memray.store.fake_log import InMemoryEventLog

DIM = 32
COMMITTER = "memray.core.committer"
# The migration fills a new collection that no reader uses until the switch.
MIGRATION = "memray.migrate.sync"
MODEL = HashingEmbedder(dim=DIM).model
PACKAGE = Path(__file__).resolve().parents[2] / "memray"


def _caller() -> str:
    return str(sys._getframe(2).f_globals.get("__name__"))


class WatchedStore(InMemoryStore):
    def __init__(self, calls: list[tuple[str, str]]) -> None:
        super().__init__(model=MODEL, dim=DIM)
        self.calls = calls

    def insert(self, rows: Sequence[StoredMemory]) -> None:
        self.calls.append(("store.insert", _caller()))
        super().insert(rows)

    def replace(self, rows: Sequence[StoredMemory]) -> None:
        self.calls.append(("store.replace", _caller()))
        super().replace(rows)

    def delete(self, user_id: str, ids: Sequence[str]) -> int:
        self.calls.append(("store.delete", _caller()))
        return super().delete(user_id, ids)

    def delete_user(self, user_id: str) -> int:
        self.calls.append(("store.delete_user", _caller()))
        return super().delete_user(user_id)


class WatchedLog(InMemoryEventLog):
    def __init__(self, calls: list[tuple[str, str]]) -> None:
        super().__init__(dim=DIM)
        self.calls = calls

    def commit(self, user_id: str, events: Sequence[MemoryEvent], ops: Sequence[StoreOp],
               **kwargs: Any) -> list[int]:
        self.calls.append(("log.commit", _caller()))
        return super().commit(user_id, events, ops, **kwargs)


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[Memory, WatchedStore, list[tuple[str, str]]]]:
    calls: list[tuple[str, str]] = []
    store = WatchedStore(calls)
    cfg = MemoryConfig(data_dir=str(tmp_path), store={"outbox_retry_s": 0})
    with Memory(cfg, embedder=HashingEmbedder(dim=DIM), store=store,
                events=WatchedLog(calls)) as m:
        yield m, store, calls


def _backfill(m: Memory, uid: str, texts: Sequence[str], *, infer: bool) -> None:
    from memray.extract.rules import RuleExtractor

    now_ms = int((utcnow() - timedelta(days=1)).timestamp() * 1000)
    turns = [LogTurn(uid, "s1", f"t{i}", "user", text, now_ms + i)
             for i, text in enumerate(texts)]
    turns.append(LogTurn(uid, "s1", "end", "assistant", "ok", now_ms + len(texts)))
    unit = build_unit(turns, infer=infer, extractor=RuleExtractor(), done=frozenset())
    assert unit is not None
    engine = m.engine()
    writer = BackfillWriter(engine)
    texts_to_embed = unit_texts(unit)
    writer.write(unit, engine.embedder.embed(texts_to_embed) if texts_to_embed else
                 engine.embedder.embed(["x"])[:0])
    writer.flush()


def _merge_low_importance(m: Memory, uid: str) -> None:
    engine = m.engine()
    changes = ChangeSet(uid)
    for text in ("I had pizza on Monday night", "I had pizza on Monday evening"):
        rec = new_record(user_id=uid, content=text, embedding_model=MODEL,
                         at=utcnow() - timedelta(days=3), importance=0.1)
        changes.put(rec, engine.embedder.embed([text])[0], None, rec.created_at)
    engine.committer.commit(changes)
    rows = maintenance.live_rows(engine, uid)
    plan = plan_user(uid, rows, utcnow(), MaintenanceSettings(merge_similarity=0.3))
    assert plan.merges, "the two pizza memories were not planned as a merge"
    vectors = {r.record.id: r.vector for r in rows}
    from collections import Counter

    assert maintenance.commit(engine, plan, vectors, engine.events.version(uid), Counter())


def _langgraph_put(m: Memory) -> None:
    from memray.integrations.langgraph import MemrayStore

    store = MemrayStore(m)
    store.put(("memories", "lg", "notes"), "k1", {"content": "likes green tea"})
    store.put(("memories", "lg", "notes"), "k1", {"content": "likes black tea"})
    store.delete(("memories", "lg", "notes"), "k1")


def _doctor_repair(m: Memory, store: WatchedStore) -> None:
    rec = m.add("I live in Lisbon", user_id="doc", infer=False).events[0].memory
    assert rec is not None
    InMemoryStore.delete(store, "doc", [rec.id])  # a lost row, behind the committer's back
    report = m.doctor("doc", repair=True)
    assert report.users[0].problems and report.problems == 0


def test_every_writer_goes_through_the_committer(watched) -> None:  # type: ignore[no-untyped-def]
    m, store, calls = watched
    from memray.compat.mem0 import Memory as Mem0Compat

    m.add([{"role": "user", "content": "I live in Hangzhou"},
           {"role": "assistant", "content": "noted"}], user_id="a")
    m.add("I moved to Shanghai", user_id="a")
    m.add("Forget where I live", user_id="a")
    said = [{"role": "user", "content": t} for t in ("I like tea", "I like tea", "I walk daily")]
    ids = [e.memory_id for e in m.add(said, user_id="b", infer=False).events]
    m.update(ids[0], "I like green tea", user_id="b")
    m.delete(ids[-1], user_id="b")
    m.add([{"role": "user", "content": "I am a nurse"}], user_id="c")
    m.flush(user_id="c")
    m.delete_all(user_id="c")
    _backfill(m, "d", ["I have a dog named Rex", "I live in Paris"], infer=False)
    _backfill(m, "e", ["I live in Rome", "I am allergic to peanuts"], infer=True)
    _merge_low_importance(m, "f")
    _langgraph_put(m)
    _doctor_repair(m, store)
    compat = Mem0Compat(m)
    compat.add("I prefer window seats", user_id="g", infer=False)
    compat.delete_all(user_id="g")
    m.profile("a", refresh=True)
    writers = {what for what, _ in calls}
    assert {"log.commit", "store.replace", "store.delete", "store.delete_user"} <= writers
    # A store's own methods may call each other (the fake's delete_user deletes by id).
    strangers = sorted({(what, who) for what, who in calls
                        if who != COMMITTER and not who.startswith("memray.store.")})
    assert strangers == [], f"written by something other than the committer: {strangers}"


def test_the_watch_sees_a_write_around_the_committer(watched) -> None:  # type: ignore[no-untyped-def]
    """The check above can fail: a direct write is caught and named."""
    m, store, calls = watched
    rec = new_record(user_id="x", content="c", embedding_model=MODEL, at=utcnow())
    store.replace([StoredMemory(rec, m.engine().embedder.embed(["c"])[0])])
    m.engine().events.commit("x", [], [], tombstones=[Tombstone("all", "*", 0)])
    assert {who for _, who in calls} == {__name__}


# -- static: no module but the committer names the write methods on a store or log ------
_WRITES = {"replace", "insert", "delete_user", "commit"}
_STORE_DELETE = "delete"


def _write_calls(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, call) of calls like `x.store.replace(...)`, `events.commit(...)`,
    `self._store.delete(...)`: a write method on something named a store or a log."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method, target = node.func.attr, ast.unparse(node.func.value)
        name = target.rsplit(".", 1)[-1].lstrip("_").lower()
        on_store = name.endswith("store") or name == "target"
        on_log = name in ("events", "log", "event_log")
        if (on_store and (method in _WRITES or method == _STORE_DELETE)) or \
                (on_log and method == "commit"):
            yield node.lineno, f"{target}.{method}"


def test_no_module_but_the_committer_calls_a_write_method() -> None:
    allowed = {PACKAGE / "core" / "committer.py", PACKAGE / "migrate" / "sync.py"}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in allowed or "store" in path.parts[len(PACKAGE.parts):-1]:
            continue  # the store and log implementations themselves
        for line, call in _write_calls(ast.parse(path.read_text(encoding="utf-8"))):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {call}")
    assert found == []


def test_the_static_scan_finds_a_direct_write() -> None:
    code = ("def f(engine, rows):\n    engine.store.replace(rows)\n"
            "    engine.events.commit('u', [], [])\n")
    assert [c for _, c in _write_calls(ast.parse(code))] == [
        "engine.store.replace", "engine.events.commit"]

