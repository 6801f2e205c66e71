"""Races between the backfill, the nightly merge and online deletes, on the fakes.

Each of these brought deleted content back before every writer went through the
committer: the backfill checked tombstones when it buffered a unit, not when it
committed it, and merges left no tombstones for what they removed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from memray import Memory, MemoryConfig
from memray.embed.hashing import HashingEmbedder
from memray.ingest.logs import LogTurn
from memray.ingest.units import build_unit, unit_texts
from memray.ingest.writer import BackfillWriter
from memray.maintain import writer as maintenance
from memray.maintain.plan import MaintenanceSettings, plan_user
from memray.models import MemoryStatus, utcnow
from memray.store.base import Where
from memray.store.fake import InMemoryStore
from memray.store.fake_log import InMemoryEventLog

DIM = 64


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    emb = HashingEmbedder(dim=DIM)
    cfg = MemoryConfig(data_dir=str(tmp_path), store={"outbox_retry_s": 0})
    with Memory(cfg, embedder=emb, store=InMemoryStore(model=emb.model, dim=DIM),
                events=InMemoryEventLog(dim=DIM)) as m:
        yield m


def buffered(writer: BackfillWriter, m: Memory, uid: str, texts: Sequence[str], *,
             session: str = "s1", days_ago: float = 1) -> None:
    """A log's user turns handed to the writer (buffered: not committed yet)."""
    ms = int((utcnow() - timedelta(days=days_ago)).timestamp() * 1000)
    turns = [LogTurn(uid, session, f"t{i}", "user", t, ms + i) for i, t in enumerate(texts)]
    unit = build_unit(turns, infer=False, extractor=None, done=frozenset())
    assert unit is not None
    writer.write(unit, m.engine().embedder.embed(unit_texts(unit)))


def contents(m: Memory, uid: str) -> list[str]:
    return sorted(r.content for r in m.get_all(user_id=uid).items)


def active(m: Memory, uid: str) -> list[str]:
    """What recall can return: a merge's members are kept, but only as MERGED."""
    return sorted(r.content for r in m.get_all(user_id=uid).items
                  if r.status == MemoryStatus.ACTIVE)


def test_a_delete_all_while_a_backfill_buffers_the_user_keeps_them_deleted(
        mem: Memory) -> None:
    writer = BackfillWriter(mem.engine(), drain_rows=10_000)
    mem.add("I live in Paris", user_id="u", infer=False)
    buffered(writer, mem, "u", ["I have a dog named Rex", "I work as a nurse"])
    buffered(writer, mem, "w", ["I like tea"])
    assert mem.delete_all(user_id="u").deleted == 1
    writer.flush()
    assert contents(mem, "u") == []
    assert contents(mem, "w") == ["I like tea"]  # another user's import is untouched
    assert writer.counts["messages_tombstoned"] == 2


def test_a_forget_while_a_backfill_buffers_the_same_turn_keeps_it_forgotten(
        mem: Memory) -> None:
    """A re-exported log holds a turn the user has since asked to forget."""
    writer = BackfillWriter(mem.engine(), drain_rows=10_000)
    mem.add("My cat Miso is three", user_id="v", infer=False, timestamp=utcnow())
    mem.add("I like tea", user_id="v", infer=False)
    buffered(writer, mem, "v", ["My cat Miso is three"], session="export-2")
    ops = [e.op for e in mem.add("please delete all your memories about my cat",
                                 user_id="v").events]
    assert ops == ["DELETE"]
    writer.flush()
    assert contents(mem, "v") == ["I like tea"]


def test_a_merge_then_a_backfill_of_the_same_turns_does_not_bring_them_back(
        mem: Memory) -> None:
    engine = mem.engine()
    said = ["I had pizza on Monday night", "I had pizza on Monday evening"]
    first = BackfillWriter(engine)
    buffered(first, mem, "p", said, days_ago=120)  # old enough to decay under the floor
    first.flush()
    rows = maintenance.live_rows(engine, "p")
    plan = plan_user("p", rows, utcnow(), MaintenanceSettings(merge_similarity=0.3))
    assert len(plan.merges) == 1, "the two pizza turns were not planned as one merge"
    assert maintenance.commit(engine, plan, {r.record.id: r.vector for r in rows},
                              engine.events.version("p"), Counter())
    merged = active(mem, "p")
    assert len(merged) == 1 and merged[0] not in said
    again = BackfillWriter(engine)  # another export of the same conversation
    buffered(again, mem, "p", said, session="export-2", days_ago=120)
    again.flush()
    assert active(mem, "p") == merged
    assert len(contents(mem, "p")) == 3  # the summary and its two members, nothing new


def test_a_langgraph_put_during_a_model_switch_lands_in_the_new_collection(
        tmp_path: Path) -> None:
    import threading

    from memray.integrations.langgraph import MemrayStore

    old_emb, new_emb = HashingEmbedder(dim=DIM, model="model-a"), \
        HashingEmbedder(dim=DIM, model="model-b")
    old_store = InMemoryStore(model=old_emb.model, dim=DIM)
    new_store = InMemoryStore(model=new_emb.model, dim=DIM)
    cfg = MemoryConfig(data_dir=str(tmp_path), store={"outbox_retry_s": 0})
    m = Memory(cfg, embedder=old_emb, store=old_store, events=InMemoryEventLog(dim=DIM))
    m.open()
    new_emb.open()
    holding, release = threading.Event(), threading.Event()

    def final() -> None:  # the migration's last step: writes are held back meanwhile
        holding.set()
        assert release.wait(30), "the test never released the switch"

    switch = threading.Thread(target=m.switch_backend, args=(new_emb, new_store, final))
    switch.start()
    try:
        assert holding.wait(30), "the switch never reached its last step"
        put = threading.Thread(target=MemrayStore(m).put,
                               args=(("memories", "lin", "notes"), "k", {"content": "tea"}))
        put.start()
        put.join(0.5)
        assert put.is_alive(), "the put did not wait for the switch"
    finally:
        release.set()
        switch.join(30)
    put.join(30)
    assert not put.is_alive(), "the put never finished after the switch"
    assert old_store.count("lin") == 0
    [row] = new_store.rows("lin", Where())
    assert row.record.embedding_model == new_emb.model
    m.close()
