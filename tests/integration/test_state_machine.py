"""Stateful property tests: hypothesis drives `Memory` through random sequences of adds
(verbatim and extracted, zh and en), updates, deletes, forgets, `delete_all`, searches,
paged listings, restarts and a night of maintenance, for users with hostile ids, and
checks every answer against a small reference model of each user's memories.

Invariants (checked after every call that reads):
- isolation: no call returns or changes another user's memory (search, get, get_all,
  history, export, write events; update/delete of another user's id is "not found");
- deleted stays deleted: a deleted, forgotten or `delete_all`-ed id is never returned by
  search, get, get_all, history or export, also after a restart and after maintenance;
- `get_all` paged with cursors returns exactly the model's ids, each once;
- the user's version strictly increases with every write that changes something.

An extracted add's facts cannot be predicted, so the model follows the events the result
reports (ADD / UPDATE / DELETE / NOOP), and checks that each names one of the user's own
memories. The maintenance step runs the nightly job's per-user logic in process
(`plan_user` + `commit`, what the Ray Data job maps over users) a year ahead, so decay,
retirement and merges happen; the Ray job itself is left out (a local Ray start alone
costs more than this whole test).

CI runs a bounded number of examples; MEMRAY_FUZZ_EXAMPLES=N runs N (a bench).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from memray import Memory, MemoryConfig, MemoryNotFoundError
from memray.embed.cache import CachedEmbedder
from memray.maintain.plan import MaintenanceSettings, plan_user
from memray.maintain.writer import commit, live_rows
from memray.models import AddResult, MemoryEvent, MemoryStatus, utcnow

# Look-alikes and injection attempts: a store that builds filters by string pasting, a
# LIKE without escaping or a normalising comparison would mix some of these up.
USERS = [
    "alice", "\u0430lice",  # Latin a / Cyrillic a
    'u" or user_id != "', "a\\", "a\\\\", "line\nbreak", "%", "a%", "*",
    "alice\u200b", "用户 一", "x" * 10_000,
]
OBJECTS_EN = ["jazz", "green tea", "hiking", "chess", "spicy food"]
OBJECTS_ZH = ["绿茶", "爬山", "下棋", "爵士乐"]
CITIES = ["Shanghai", "Hangzhou", "Paris", "Berlin"]
VERBATIM = [
    "I am allergic to peanuts", "My daughter is called Mia", "I work nine to six",
    "The meeting with Tom went well", "我每天早上跑步", "我的生日是五月三日",
    "我对花生过敏", "Remember that my locker code is 4711",
]
EXTRACTED = (
    [f"I like {o}" for o in OBJECTS_EN] + [f"I live in {c}" for c in CITIES]
    + [f"我喜欢{o}" for o in OBJECTS_ZH] + ["我住在北京", "我住在上海", "My name is Bob",
                                           "I am a teacher", "I don't like jazz anymore"]
)
FORGETS = ([f"forget that I like {o}" for o in OBJECTS_EN]
           + [f"忘记我喜欢{o}" for o in OBJECTS_ZH]
           + ["forget where I live", "forget my working hours", "忘掉我住在哪里"])
QUERIES = ["What do I like?", "Where do I live?", "我喜欢什么", "allergies", "我住在哪里",
           "What is my name?", "locker code"]
_EXAMPLES = int(os.environ.get("MEMRAY_FUZZ_EXAMPLES", "0"))


@dataclass
class UserModel:
    """What one user has: ids of memories that exist (with their status), ids gone."""

    live: dict[str, str] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)
    session_only: set[str] = field(default_factory=set)
    version: int = 0

    def active(self) -> set[str]:
        return {i for i, status in self.live.items() if status == MemoryStatus.ACTIVE.value}


class MemoryMachine(RuleBasedStateMachine):
    """`Memory` against the model; `config` and `embedder` are set by `machine_class`."""

    config_extra: ClassVar[dict[str, Any]] = {}
    embedder: CachedEmbedder
    counts: Counter[str]

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="memray-sm-"))
        tag = uuid.uuid4().hex[:8]
        extra = {k: (v.replace("{tag}", tag) if isinstance(v, str) else v)
                 for k, v in self.config_extra.get("store", {}).items()}
        self.config = MemoryConfig.model_validate(
            {"data_dir": str(self.dir), **({"store": extra} if extra else {})})
        self.mem = Memory(self.config, embedder=self.embedder).open()
        self.users: dict[str, UserModel] = {}
        self.owner: dict[str, str] = {}  # every id ever seen -> its user
        self.counts["examples"] += 1

    def teardown(self) -> None:
        try:
            for user in self.users:
                self._check_user(user)
        finally:
            self.mem.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers -----------------------------------------------------------------------
    def _model(self, user: str) -> UserModel:
        return self.users.setdefault(user, UserModel())

    def _ids(self) -> list[str]:
        return sorted(self.owner)

    def _saw_version(self, user: str, version: int, changed: bool) -> None:
        model = self._model(user)
        if changed:
            assert version > model.version, (version, model.version)
        else:
            assert version in (0, model.version), (version, model.version)
        model.version = max(model.version, version)

    def _apply(self, user: str, result: AddResult) -> None:
        """Follow an add's events; each must name the user and one of the user's ids."""
        model = self._model(user)
        changed = False
        for e in result.events:
            self._apply_event(user, model, e)
            changed = changed or e.op != "NOOP"
        self._saw_version(user, result.version, changed)

    def _apply_event(self, user: str, model: UserModel, e: MemoryEvent) -> None:
        assert e.user_id == user and self.owner.get(e.memory_id, user) == user, e
        if e.op == "ADD":
            assert e.memory_id not in model.live and e.memory_id not in model.gone, e
            assert e.memory is not None and e.memory.user_id == user
            model.live[e.memory_id] = e.memory.status.value
            self.owner[e.memory_id] = user
        elif e.op == "UPDATE":
            assert e.memory_id in model.live and e.memory is not None, e
            model.live[e.memory_id] = e.memory.status.value
        elif e.op == "DELETE":
            assert e.memory_id in model.live, e
            del model.live[e.memory_id]
            model.gone.add(e.memory_id)
        else:
            assert e.memory_id in model.live, e

    def _check_user(self, user: str) -> None:
        """Every read of the user against the model."""
        model = self._model(user)
        self._check_pages(user, model, limit=3)
        assert self.mem.version(user_id=user) == model.version
        for mid in model.gone | model.session_only:
            assert self.mem.get(mid, user_id=user) is None
            assert self.mem.history(mid, user_id=user) == []
        exported = list(self.mem.export(user_id=user))
        assert exported[0]["user_id"] == user
        memories = {d["id"] for d in exported if d["kind"] == "memory"}
        assert memories == set(model.live)
        assert all(d["user_id"] == user for d in exported[1:])
        events = {d["memory_id"] for d in exported if d["kind"] == "event"}
        assert not events & (model.gone | model.session_only)
        self.counts["checks"] += 1

    def _check_pages(self, user: str, model: UserModel, limit: int) -> None:
        seen: list[str] = []
        cursor = None
        while True:
            page = self.mem.get_all(user_id=user, limit=limit, cursor=cursor)
            assert len(page.items) <= limit
            for r in page.items:
                assert r.user_id == user
                assert model.live.get(r.id) == r.status.value, (r.id, r.status)
            seen += [r.id for r in page.items]
            if page.next_cursor is None:
                break
            assert page.items and page.next_cursor == page.items[-1].id
            cursor = page.next_cursor
        assert len(seen) == len(set(seen)), "a page repeated a memory"
        assert seen == sorted(seen) and set(seen) == set(model.live)

    # -- writes ------------------------------------------------------------------------
    @initialize(user=st.sampled_from(USERS), text=st.sampled_from(VERBATIM))
    def first_add(self, user: str, text: str) -> None:
        self.add_verbatim(user, [text])

    @rule(user=st.sampled_from(USERS),
          texts=st.lists(st.sampled_from(VERBATIM + EXTRACTED), min_size=1, max_size=3))
    def add_verbatim(self, user: str, texts: list[str]) -> None:
        messages = [{"role": "user", "content": t} for t in texts]
        self._apply(user, self.mem.add(messages, user_id=user, infer=False))

    @rule(user=st.sampled_from(USERS), text=st.sampled_from(EXTRACTED))
    def add_extracted(self, user: str, text: str) -> None:
        self._apply(user, self.mem.add(text, user_id=user, infer=True))

    @rule(user=st.sampled_from(USERS), text=st.sampled_from(FORGETS))
    def forget(self, user: str, text: str) -> None:
        result = self.mem.add(text, user_id=user, infer=True)
        assert all(e.op in ("DELETE", "NOOP") for e in result.events), result.events
        self._apply(user, result)

    @rule(user=st.sampled_from(USERS), text=st.sampled_from(VERBATIM),
          consent=st.sampled_from([0, 1]))
    def add_without_persistent_consent(self, user: str, text: str, consent: int) -> None:
        result = self.mem.add(text, user_id=user, infer=False, consent=consent,
                              session_id="s1")
        assert all(e.op == "ADD" for e in result.events) and (consent or not result.events)
        self._model(user).session_only |= {e.memory_id for e in result.events}

    @precondition(lambda self: self.owner)
    @rule(user=st.sampled_from(USERS), data=st.data(),
          text=st.sampled_from(VERBATIM + EXTRACTED))
    def update(self, user: str, data: st.DataObject, text: str) -> None:
        mid = data.draw(st.sampled_from(self._ids()))
        model = self._model(user)
        if mid not in model.live:  # another user's, or gone: exactly like a missing id
            with pytest.raises(MemoryNotFoundError):
                self.mem.update(mid, text, user_id=user)
            return
        event = self.mem.update(mid, text, user_id=user)
        assert event.op == "UPDATE" and event.memory_id == mid and event.user_id == user
        assert event.memory is not None and event.memory.status.value == model.live[mid]
        assert event.version is not None
        self._saw_version(user, event.version, changed=True)

    @precondition(lambda self: self.owner)
    @rule(user=st.sampled_from(USERS), data=st.data())
    def delete(self, user: str, data: st.DataObject) -> None:
        mid = data.draw(st.sampled_from(self._ids()))
        model = self._model(user)
        if mid not in model.live:
            with pytest.raises(MemoryNotFoundError):
                self.mem.delete(mid, user_id=user)
            return
        event = self.mem.delete(mid, user_id=user)
        assert event.op == "DELETE" and event.memory_id == mid and event.version is not None
        receipt = event.receipt
        assert receipt is not None and receipt.verified and mid in receipt.memory_ids
        # The cascade: a summary's members go with it; a member's summary is rebuilt.
        for gone in [*receipt.memory_ids, *(d.memory_id for d in receipt.derived)]:
            assert gone in model.live, (gone, receipt)
            del model.live[gone]
            model.gone.add(gone)
        for d in receipt.derived:
            if d.rebuilt_as is not None:
                rebuilt = self.mem.get(d.rebuilt_as, user_id=user)
                assert rebuilt is not None and d.rebuilt_as not in model.gone
                model.live[d.rebuilt_as] = rebuilt.status.value
                self.owner[d.rebuilt_as] = user
        self._saw_version(user, event.version, changed=True)

    @rule(user=st.sampled_from(USERS))
    def delete_all(self, user: str) -> None:
        model = self._model(user)
        assert self.mem.delete_all(user_id=user).deleted == len(model.live)
        model.gone |= set(model.live)
        model.live.clear()
        self._saw_version(user, self.mem.version(user_id=user), changed=True)

    # -- reads -------------------------------------------------------------------------
    @rule(user=st.sampled_from(USERS), query=st.sampled_from(QUERIES),
          everything=st.booleans())
    def search(self, user: str, query: str, everything: bool) -> None:
        model = self._model(user)
        hits = self.mem.search(query, user_id=user, top_k=50,
                               threshold=-1.0 if everything else None)
        ids = [h.memory.id for h in hits]
        assert len(ids) == len(set(ids))
        for h in hits:
            assert h.memory.user_id == user and h.memory.status == MemoryStatus.ACTIVE
        assert set(ids) <= model.active(), (set(ids) - model.active())
        if everything and len(model.active()) <= 50:  # -1: all of them, up to top_k
            assert set(ids) == model.active()
        if not model.active():  # nothing of the user's own: nothing at all
            assert self.mem.context(query, user_id=user) == ""

    @precondition(lambda self: self.owner)
    @rule(user=st.sampled_from(USERS), data=st.data())
    def get_and_history(self, user: str, data: st.DataObject) -> None:
        mid = data.draw(st.sampled_from(self._ids()))
        model = self._model(user)
        record = self.mem.get(mid, user_id=user)
        history = self.mem.history(mid, user_id=user)
        if mid not in model.live:
            assert record is None and history == []
            return
        assert record is not None and record.user_id == user and record.id == mid
        assert record.status.value == model.live[mid]
        assert history and all(e.memory_id == mid and e.user_id == user for e in history)

    @rule(user=st.sampled_from(USERS), limit=st.integers(1, 7))
    def list_pages(self, user: str, limit: int) -> None:
        self._check_pages(user, self._model(user), limit)

    @rule(user=st.sampled_from(USERS))
    def check_user(self, user: str) -> None:
        self._check_user(user)

    # -- lifecycle ---------------------------------------------------------------------
    @rule()
    def restart(self) -> None:
        self.mem.close()
        self.mem = Memory(self.config, embedder=self.embedder).open()
        self.counts["restarts"] += 1
        for user in self.users:
            self._check_user(user)

    @rule()
    def maintenance(self) -> None:
        """A night of maintenance a year from now: decay, retirement and merges."""
        engine = self.mem.engine()
        now = utcnow() + timedelta(days=365)
        for user, model in self.users.items():
            rows = live_rows(engine, user)
            if not rows:
                continue
            plan = plan_user(user, rows, now, MaintenanceSettings())
            vectors = {r.record.id: r.vector for r in rows}
            assert commit(engine, plan, vectors, engine.events.version(user), Counter())
            for _, new, _ in plan.updates:
                assert new.user_id == user
                model.live[new.id] = new.status.value
            for merge in plan.merges:
                assert merge.merged.user_id == user
                assert all(r.id in model.live for r in merge.originals)
                model.live[merge.merged.id] = merge.merged.status.value
                self.owner[merge.merged.id] = user
                for r in merge.originals:  # kept inside the summary, never recalled
                    model.live[r.id] = MemoryStatus.MERGED.value
            if not plan.empty:
                self._saw_version(user, self.mem.version(user_id=user), changed=True)
                self.counts["maintenance_changes"] += 1
        for user in self.users:
            self._check_user(user)

    @invariant()
    def no_id_changed_hands(self) -> None:
        for user, model in self.users.items():
            assert all(self.owner[mid] == user for mid in model.live)
        self.counts["steps"] += 1


def machine_class(embedder: CachedEmbedder, counts: Counter[str],
                  store: dict[str, Any] | None = None) -> type[MemoryMachine]:
    return type("Machine", (MemoryMachine,), {
        "embedder": embedder, "counts": counts, "config_extra": {"store": store or {}}})


def run_machine(embedder: CachedEmbedder, *, examples: int, steps: int,
                store: dict[str, Any] | None = None) -> Counter[str]:
    """Run the machine; returns how many examples, steps, checks and restarts ran."""
    counts: Counter[str] = Counter()
    run_state_machine_as_test(machine_class(embedder, counts, store), settings=settings(
        max_examples=_EXAMPLES or examples, stateful_step_count=steps, deadline=None,
        derandomize=not _EXAMPLES, database=None,
        suppress_health_check=list(HealthCheck)))
    print(f"\nstate machine: {dict(counts)}")
    return counts


def test_memory_against_the_model(embedder: CachedEmbedder) -> None:
    counts = run_machine(embedder, examples=12, steps=40)
    assert counts["steps"] > 100 and counts["checks"] > 0


def test_a_deleted_merged_original_keeps_no_history(embedder: CachedEmbedder) -> None:
    """Found by the machine: maintenance deleted merged originals from the store but kept
    their history, so `history()` and `export()` still returned a deleted memory's content.
    Now a merge keeps its originals (status merged); deleting one removes its history and
    rebuilds the summary without it."""
    machine = machine_class(embedder, Counter())()
    try:
        machine.first_add(user="alice", text="I am allergic to peanuts")
        machine.add_verbatim(user="alice", texts=["我喜欢爬山", "我喜欢绿茶"])
        machine.maintenance()
        model = machine.users["alice"]
        merged = [mid for mid, status in model.live.items() if status == "merged"]
        assert merged, "the two low-importance memories were expected to merge"
        victim = merged[0]
        machine.delete(user="alice", data=_Drawn(victim))
        assert victim in model.gone
        assert machine.mem.history(victim, user_id="alice") == []
        machine._check_user("alice")
    finally:
        machine.teardown()


class _Drawn:
    """Stands in for hypothesis' `data` in a direct call of a rule: draws `value`."""

    def __init__(self, value: str) -> None:
        self.value = value

    def draw(self, _strategy: object) -> str:
        return self.value


@pytest.mark.milvus_server
def test_memory_against_the_model_on_a_server(embedder: CachedEmbedder,
                                              milvus_server: str) -> None:
    store = {"milvus_uri": milvus_server, "alias": "sm_{tag}", "collection_prefix": "sm_{tag}"}
    counts = run_machine(embedder, examples=2, steps=20, store=store)
    assert counts["steps"] > 20
