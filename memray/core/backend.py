"""`Backend`: what an open `Memory` runs on, and its lifecycle.

The live embedder, vector store and hot set (replaced as one `Live` so a migration's
switch never pairs one model's query vector with the other model's collection), the event
log, the committer and the write path built over them; opening (with the replay of what a
crash left queued and the repair of a torn embedded store), closing, the background drain
of the outbox, following a model that a migration elsewhere made live, and the switch at
the end of a migration. Nothing here decides what a memory is.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import NamedTuple, TypeVar

from memray.config import MemoryConfig
from memray.core.committer import Committer
from memray.core.deletions import Deletions
from memray.core.doctor import Doctor
from memray.core.engine import Engine
from memray.core.factory import build_embedder, build_event_log, build_store, build_write_path
from memray.core.follow import LIVE_EMBEDDER, LiveEmbedder, Throttle
from memray.core.gate import WriteGate
from memray.core.hotset import HotSet
from memray.core.profile import Profiles
from memray.core.session import SessionMemory
from memray.core.versions import OutboxDrainer, SeenVersions
from memray.core.writepath import WritePath
from memray.crypto.cipher import UserCipher
from memray.crypto.sealed import SealedLog, SealedStore
from memray.crypto.setup import build_cipher
from memray.embed.base import Embedder
from memray.errors import ConfigError, ModelChangedError, StoreError
from memray.settings import Settings
from memray.store.base import VectorStore
from memray.store.events import EventLog

log = logging.getLogger(__name__)
T = TypeVar("T")
# Set to "open" while a process holds an embedded store, "closed" when it closes it.
_EMBEDDED_STATE = "embedded_store_state"


class Live(NamedTuple):
    """What a search uses, taken together once per search."""

    embedder: Embedder
    store: VectorStore
    hot: HotSet | None


class _Open(NamedTuple):
    events: EventLog
    committer: Committer
    writer: WritePath
    live: Live


class Backend:
    """Opened on first use; thread-safe. `config` may be replaced by a switch to a new
    model (its embedder section); everything else about it stays."""

    def __init__(self, config: MemoryConfig, settings: Settings, *,
                 embedder: Embedder | None = None, store: VectorStore | None = None,
                 events: EventLog | None = None) -> None:
        self.config, self.settings = config, settings
        self.sessions = SessionMemory()
        self._embedder = embedder or build_embedder(config)
        self._store_arg, self._events_arg = store, events
        self._open: _Open | None = None
        self._retired: list[VectorStore] = []
        self._gate = WriteGate()
        self._open_lock = threading.Lock()
        self._drainer: OutboxDrainer | None = None
        self._cipher: UserCipher | None = None
        self.seen = SeenVersions()
        # An injected embedder (a Serve embedding deployment) cannot be rebuilt here: such
        # a process keeps its model until it is redeployed with the new one.
        self._model_check = Throttle(0 if embedder else config.store.model_check_s)

    # -- what is open ----------------------------------------------------------------------
    def _parts(self) -> _Open:
        opened = self._open
        if opened is None:
            self.open()
            opened = self._open
        assert opened is not None
        return opened

    @property
    def events(self) -> EventLog:
        return self._parts().events

    @property
    def committer(self) -> Committer:
        return self._parts().committer

    @property
    def writer(self) -> WritePath:
        return self._parts().writer

    @property
    def live(self) -> Live:
        return self._parts().live

    @property
    def hot(self) -> HotSet | None:
        """The live hot set (None: off, or not open)."""
        return self._open.live.hot if self._open is not None else None

    @property
    def embedder_if_open(self) -> Embedder | None:
        """The live embedder without opening anything (None: not open)."""
        return self._open.live.embedder if self._open is not None else None

    def engine(self) -> Engine:
        """The open store, event log and committer, for batch jobs and integrations."""
        opened = self._parts()
        return Engine(self.config, opened.live.store, opened.events, opened.committer,
                      opened.live.embedder)

    # -- lifecycle -------------------------------------------------------------------------
    def open(self) -> None:
        with self._open_lock:
            if self._open is not None:
                return
            embedder = self._embedder
            embedder.open()
            self._check_dim(embedder)
            store = self._store_arg or build_store(self.config, self.settings,
                                                   model=embedder.model, dim=embedder.dim)
            events = self._events_arg or build_event_log(self.config, self.settings,
                                                         dim=embedder.dim)
            store.open()
            try:
                events.open()
                self._cipher = build_cipher(self.config.security.encryption, self.settings,
                                            events)
            except Exception:
                store.close()
                events.close()
                raise
            if self._cipher is not None:
                store, events = self._sealed(store), SealedLog(events, self._cipher)
            self._install(events, embedder, store)
            self.committer.drain()
            self._recover_if_crashed(store, events)
            self._drainer = OutboxDrainer(self._drain_now, self.config.store.outbox_retry_s)
            self._drainer.start()

    def _sealed(self, store: VectorStore) -> VectorStore:
        """`store` through the cipher when encryption is on (memray/crypto/sealed.py)."""
        return store if self._cipher is None else SealedStore(store, self._cipher)

    @property
    def encrypted(self) -> bool:
        return self.config.security.encryption.enabled

    def _check_dim(self, embedder: Embedder) -> None:
        wanted, dim = self.config.embedder.dim, embedder.dim
        if wanted is not None and wanted != dim and self.config.embedder.provider != "hashing":
            raise ConfigError(f"embedder.dim is {wanted}, but the model {embedder.model} "
                              f"makes {dim}-dimensional vectors; leave embedder.dim unset "
                              f"or set it to {dim}")

    def close(self) -> None:
        with self._open_lock:
            opened = self._open
            if opened is None:
                return
            if self._drainer is not None:
                self._drainer.stop()
                self._drainer = None
            self._open = None
            self.sessions.clear()
            store, events = opened.live.store, opened.events
            store.close()
            if store.is_embedded and not events.shared:
                events.set_meta(_EMBEDDED_STATE, "closed")
            for retired in self._retired:
                retired.close()
            self._retired.clear()
            events.close()

    def _recover_if_crashed(self, store: VectorStore, events: EventLog) -> None:
        """An embedded store whose last process never closed it (killed, power lost) may
        have lost its latest writes (milvus-lite keeps them in a WAL that a crash can
        tear), while the log holds them as applied: the doctor rebuilds what is missing
        from the log before anything is read."""
        if not store.is_embedded or events.shared:
            return
        if events.get_meta(_EMBEDDED_STATE) == "open":
            log.warning("%s was not closed by the last process that used it; checking the "
                        "vector store against the event log", self.config.data_dir)
            report = self.write(lambda: Doctor(self.engine()).run(repair=True))
            log.warning("recovered: %d problem(s) found and repaired, %d left",
                        sum(u.problems for u in report.users), report.problems)
        events.set_meta(_EMBEDDED_STATE, "open")

    def _drain_now(self) -> None:
        opened = self._open
        if opened is not None:
            with self._gate.shared():
                opened.committer.drain()

    def _install(self, events: EventLog, embedder: Embedder, store: VectorStore) -> None:
        hot = None
        mode = self.config.recall.hot_set
        # A hot set is checked against the user's version in the log before every use, so
        # it is coherent wherever every writer bumps that version: an embedded store, or
        # a server whose writers all share this log (PostgreSQL).
        shared = events.shared
        if mode == "on" or (mode == "auto" and (store.is_embedded or shared)):
            hot = HotSet(dim=embedder.dim, max_users=self.config.recall.hot_set_users)
        committer = Committer(store, events, gate=self._gate, on_change=hot,
                              check=self._live_model_check(events, embedder.model)
                              if shared else None,
                              seen=self.seen if shared else None)
        writer = build_write_path(self.config, store=store, events=events,
                                  committer=committer, embedder=embedder,
                                  sessions=self.sessions)
        committer.deletions = Deletions(store, events, embedder, hot, self._refresh_profile,
                                        shred=self._cipher.shred if self._cipher else None)
        self._embedder = embedder
        self._open = _Open(events, committer, writer, Live(embedder, store, hot))

    def _refresh_profile(self, user_id: str) -> None:
        Profiles(self.engine()).refresh(user_id)

    # -- writes and models -----------------------------------------------------------------
    def write(self, run: Callable[[], T], retry: Callable[[], T] | None = None) -> T:
        """`run` under the write gate; if a migration elsewhere switched the model first,
        follow it and try once more (`retry`, when the retry differs)."""
        try:
            with self._gate.shared():
                return run()
        except ModelChangedError:
            self.follow_model(force=True)
            with self._gate.shared():
                return (retry or run)()

    @staticmethod
    def _live_model_check(events: EventLog, model: str) -> Callable[[], None]:
        """With a shared log, every write checks under its user's lock (which a
        migration's switch waits for) that its model is still the live one."""
        def check() -> None:
            raw = events.get_meta(LIVE_EMBEDDER)
            if raw is not None and LiveEmbedder.loads(raw).model != model:
                raise ModelChangedError(f"the live embedding model is no longer {model}")

        return check

    def switch(self, embedder: Embedder, store: VectorStore, final: Callable[[], None], *,
               config: MemoryConfig | None = None) -> None:
        """Make (embedder, store) the live pair: the last step of a migration.

        Writes wait while this runs: pending store ops are applied, then `final` runs
        (the last catch-up, the checks and the alias switch; an exception aborts and
        nothing is switched). Searches keep running on the old pair until the swap.
        """
        with self._gate.exclusive():
            opened = self._parts()
            if not opened.committer.drain():
                raise StoreError("queued writes could not be applied; not switching")
            final()
            opened.events.set_dim(embedder.dim)
            with self._open_lock:
                if config is not None:
                    self.config = config
                self._install(opened.events, embedder, store)
                self._retired.append(opened.live.store)  # searches in flight may use it

    def follow_model(self, *, force: bool = False) -> None:
        """Switch to the embedder a migration made live, if it changed (throttled)."""
        opened = self._open
        if opened is None or not (force or self._model_check.due()):
            return
        raw = opened.events.get_meta(LIVE_EMBEDDER)
        if raw is None:
            return
        live = LiveEmbedder.loads(raw)
        if live.model == self._embedder.model:
            return
        config = self.config.model_copy(update={"embedder": live.config})
        embedder = build_embedder(config)
        embedder.open()
        store = build_store(config, self.settings, model=embedder.model, dim=embedder.dim)
        store.open()
        try:
            self.switch(embedder, self._sealed(store), lambda: None, config=config)
        except StoreError as exc:  # e.g. old-model writes still queued: next check retries
            store.close()
            log.warning("not switching to %s yet: %s", live.model, exc)
            return
        log.info("switched to embedder %s after a migration", live.model)

    @property
    def embedder(self) -> Embedder:
        """The live embedder (the one given or built until a switch replaces it)."""
        return self._embedder
