"""`MilvusStore`: the real `VectorStore`, on milvus-lite (a local dir) or a Milvus server.

Layout: one collection per embedding model and dimension (named <prefix>_<slug>_<dim>),
reached through an alias; `user_id` is the partition key; COSINE metric.
Rows are replaced by delete-then-insert, never `upsert`: on Milvus 2.3 an upserted row
in a partition-key collection is found by id but not by a `user_id` filter, so a later
delete-by-filter would leave it behind (a deleted memory surviving).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from memray import tracing
from memray.errors import DimensionMismatchError, StoreError, StoreUnavailableError
from memray.models import MemoryRecord
from memray.store.base import StoredMemory, Vector, Where
from memray.store.filters import build_filter, quote
from memray.store.rows import SCALAR_FIELDS, from_row, to_row

log = logging.getLogger(__name__)


class _ToDebug(logging.Filter):
    """Re-levels a record to DEBUG, shown only where that logger has DEBUG on. Every
    failed Milvus call reaches the caller as a StoreError that names the cause and what to
    do; pymilvus and milvus-lite also log each failure with a traceback at ERROR (pymilvus
    through its own handler), which buried that message."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.DEBUG:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


for _name in ("pymilvus.decorators", "milvus_lite.adapter.grpc.servicer",
              "milvus_lite.server_manager"):
    logging.getLogger(_name).addFilter(_ToDebug())
T = TypeVar("T")
_BATCH = 1000
_QUERY_WINDOW = 16_384  # Milvus' largest offset+limit for one query.

# milvus-lite serves one data dir per process from a shared in-process server; count
# the users so closing one Memory does not pull the dir from under another.
_lite_refs: dict[str, int] = {}
_lite_lock = threading.Lock()


class _LiteNoiseFilter(logging.Filter):
    """milvus-lite's gRPC server lacks AllocTimestamp, which pymilvus calls once while
    creating an index and then works around; grpc logs that as an ERROR with a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Method not implemented" not in record.getMessage()


def _small_lite_memtable() -> None:
    """milvus-lite 3 keeps inserted rows in a memtable until 128 MB of Arrow buffers, and
    every query and search walks that memtable row by row in Python. Memory's single-row
    adds made each add slower as the dir grew (0.3 s at 2,000 rows) and the process grow
    ~60 KB a row until the flush. A 256 KiB budget flushes to Parquet segments (searched
    vectorised) every ~120 rows: adds stay ~50 ms. milvus-lite reads it once, at its first
    import (the first lite open); a value the user set wins."""
    os.environ.setdefault("MILVUS_LITE_MEMTABLE_MEMORY_LIMIT_BYTES", str(256 * 1024))


def _system_arrow_pool() -> None:
    """milvus-lite builds Arrow batches, snapshots and segments on every write and flush.
    pyarrow's default pool (mimalloc) keeps what they free: 2,000 single adds grew the
    process by 106 MB while Arrow itself held 4 MB; with the system allocator, 43 MB
    (measured in process, 2026-12-03). Process-wide, so only where lite runs."""
    import pyarrow as pa

    if pa.default_memory_pool().backend_name != "system":
        pa.set_memory_pool(pa.system_memory_pool())


def _single_thread_faiss() -> None:
    """milvus-lite searches with FAISS in this process. Its idle OpenMP threads spin-wait
    and starve torch's (measured: query-embedding p95 98 ms -> 18 ms on 2 cores); one
    user's rows are far too few for threads to pay off anyway."""
    try:
        import faiss
    except ImportError:
        return
    faiss.omp_set_num_threads(1)


def _lite_dir_locked(data_dir: Path) -> bool:
    """True when another process holds milvus-lite's advisory lock on the dir."""
    import fcntl

    lock = data_dir / "LOCK"
    if not lock.exists():
        return False
    with open(lock, "a+b") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    return False


def collection_name(prefix: str, model: str, dim: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")[:100] or "model"
    return f"{prefix}_{slug}_{dim}"


def is_lite_uri(uri: str) -> bool:
    return not re.match(r"^[a-z]+://", uri)


class MilvusStore:
    """A `VectorStore` over pymilvus' `MilvusClient`. No I/O until `open()`."""

    def __init__(
        self, uri: str, *, model: str, dim: int, alias: str = "memray_memories",
        prefix: str = "memray", token: str | None = None, timeout_s: float = 10.0,
        strong_window_s: float = 10.0, bind_alias: bool = True, open_timeout_s: float = 60.0,
    ) -> None:
        # `timeout_s` goes to every call: pymilvus' client-level timeout bounds only the
        # connecting, and a call without one of its own waits for as long as the server
        # holds it (a Milvus shutting down held reads until it was killed).
        self._uri, self._token, self._timeout = uri, token, timeout_s
        # Opening waits for the server's channel to be ready: on a busy machine a second
        # client of this process's milvus-lite server took longer than 10 s.
        self._open_timeout = open_timeout_s
        self._window = strong_window_s
        self._strong_until = 0.0
        self._written: dict[str, float] = {}
        self._model, self._dim, self._alias = model, dim, alias
        self._collection = collection_name(prefix, model, dim)
        # bind_alias=False: work on this model's collection by name and leave the alias
        # alone (a migration fills the next collection while the alias serves the old one).
        self._bind = bind_alias
        # Reads and writes go to this model's collection by name, never through the alias:
        # when another process switches the alias to a new model, this process keeps a
        # consistent (model, collection) pair until it follows the switch itself.
        self._target = self._collection
        self._client: Any = None

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def model(self) -> str:
        return self._model

    @property
    def is_embedded(self) -> bool:
        """True for milvus-lite: this process owns the data, so it sees every write."""
        return is_lite_uri(self._uri)

    @property
    def collection(self) -> str:
        """The collection this store reads and writes (its model's, never the alias)."""
        return self._collection

    @property
    def uri(self) -> str:
        """The Milvus server URI, or the milvus-lite file path."""
        return self._uri

    # -- lifecycle ---------------------------------------------------------------
    def open(self) -> None:
        from pymilvus import MilvusClient

        if is_lite_uri(self._uri):
            Path(self._uri).parent.mkdir(parents=True, exist_ok=True)
            _single_thread_faiss()
            _small_lite_memtable()
            _system_arrow_pool()
            grpc_log = logging.getLogger("grpc._server")
            if not any(isinstance(f, _LiteNoiseFilter) for f in grpc_log.filters):
                grpc_log.addFilter(_LiteNoiseFilter())
        try:
            self._client = MilvusClient(uri=self._uri, token=self._token or "",
                                        timeout=self._open_timeout)
        except Exception as exc:
            raise StoreUnavailableError(self._open_error(exc)) from exc
        if is_lite_uri(self._uri):
            with _lite_lock:
                key = str(Path(self._uri).resolve())
                _lite_refs[key] = _lite_refs.get(key, 0) + 1
        try:
            self._call(self._ensure_collection)
        except StoreError as exc:
            if type(exc) is not StoreError or not is_lite_uri(self._uri):
                raise  # a known mismatch (dimension, model) says what it is already
            self.close()
            raise StoreError(f"milvus-lite dir {self._uri} cannot be read ({exc}). Nothing "
                             "was changed. Restore it from a backup, or move it aside and "
                             "run `memray doctor --repair`, which rebuilds the vectors from "
                             "the event log.") from exc
        self._strong_until = time.monotonic() + self._window

    def _open_error(self, exc: Exception) -> str:
        text = str(exc)
        if is_lite_uri(self._uri) and not os.access(Path(self._uri).parent, os.W_OK):
            return (f"milvus-lite dir {self._uri} is on a read-only file system (or one this "
                    "process may not write); nothing was changed")
        if is_lite_uri(self._uri) and self._served_here():
            return (f"milvus-lite dir {self._uri}: this process's milvus-lite server did not "
                    f"answer within {self._open_timeout:g} s (store.open_timeout_s; is the "
                    f"machine overloaded?): {text}")
        if is_lite_uri(self._uri) and _lite_dir_locked(Path(self._uri)):
            return (f"milvus-lite dir {self._uri} is open in another process; one process "
                    "owns a lite dir (serve it with `milvus-lite server` to share it)")
        return (f"cannot open Milvus at {self._uri} (waited up to {self._open_timeout:g} s, "
                f"store.open_timeout_s): {text}")

    def _served_here(self) -> bool:
        """True when this process already serves the lite dir (another store has it open
        here), so its lock is ours and a failure to connect is not another process's."""
        with _lite_lock:
            return _lite_refs.get(str(Path(self._uri).resolve()), 0) > 0

    def close(self) -> None:
        if self._client is None:
            return
        client, self._client = self._client, None
        client.close()
        if is_lite_uri(self._uri):
            self._release_lite()

    def _release_lite(self) -> None:
        key = str(Path(self._uri).resolve())
        with _lite_lock:
            _lite_refs[key] -= 1
            if _lite_refs[key] > 0:
                return
            del _lite_refs[key]
        from milvus_lite.server_manager import server_manager_instance

        server_manager_instance.release_server(key)

    # -- schema ------------------------------------------------------------------
    def _ensure_collection(self) -> None:
        c = self._client
        if not self._bind:
            if not c.has_collection(self._collection, timeout=self._timeout):
                self._create_collection()
            self._check_collection(self._collection)
            c.load_collection(self._collection)
            return
        target = self._alias_target()
        if target is None:
            if not c.has_collection(self._collection, timeout=self._timeout):
                self._create_collection()
            c.create_alias(collection_name=self._collection, alias=self._alias,
                           timeout=self._timeout)
            target = self._collection
        self._check_collection(target)
        c.load_collection(target)

    def _alias_target(self) -> str | None:
        aliases = set()
        for name in self._client.list_collections(timeout=self._timeout):
            aliases.update(self._client.list_aliases(collection_name=name, timeout=self._timeout)
                           .get("aliases", []))
        if self._alias not in aliases:
            return None
        target: str = self._client.describe_alias(alias=self._alias,
                                                  timeout=self._timeout)["collection_name"]
        return target

    def alias_target(self) -> str | None:
        """The collection the alias points to now (None: no alias yet)."""
        return self._call(self._alias_target)

    def point_alias_here(self) -> str | None:
        """Switch the alias to this store's collection in one step; returns the previous
        target. Readers through the alias see the old or the new collection, never none."""
        def run() -> str | None:
            previous = self._alias_target()
            if previous is None:
                self._client.create_alias(collection_name=self._collection, alias=self._alias,
                                          timeout=self._timeout)
            elif previous != self._collection:
                self._client.alter_alias(collection_name=self._collection, alias=self._alias,
                                         timeout=self._timeout)
            return previous

        return self._call(run)

    def _check_collection(self, name: str) -> None:
        """The collection's name records its model and dimension (milvus-lite keeps no
        collection description), and its vector field must agree with it."""
        info = self._client.describe_collection(name, timeout=self._timeout)
        dims = [int(f["params"]["dim"]) for f in info["fields"] if f["name"] == "vector"]
        if (self._bind and name != self._collection) or dims != [self._dim]:
            have = f"{dims[0] if dims else '?'} dims"
            raise DimensionMismatchError(
                f"alias {self._alias!r} points to collection {name!r} ({have}), but the "
                f"configured embedder {self._model} ({self._dim} dims) writes to collection "
                f"{self._collection!r}; migrate the data or configure the model it was made "
                "with"
            )

    def _create_collection(self) -> None:
        from pymilvus import DataType

        c = self._client
        s = c.create_schema(auto_id=False, enable_dynamic_field=False)
        s.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
        s.add_field("user_id", DataType.VARCHAR, max_length=65535, is_partition_key=True)
        for name in ("agent_id", "session_id"):
            s.add_field(name, DataType.VARCHAR, max_length=65535)
        for name in ("type", "status"):
            s.add_field(name, DataType.VARCHAR, max_length=32)
        s.add_field("slot", DataType.VARCHAR, max_length=512)
        s.add_field("content", DataType.VARCHAR, max_length=65535)
        s.add_field("importance", DataType.FLOAT)
        s.add_field("confidence", DataType.FLOAT)
        for name in ("created_at", "updated_at", "last_confirmed_at", "expires_at"):
            s.add_field(name, DataType.INT64)
        s.add_field("content_hash", DataType.VARCHAR, max_length=64)
        s.add_field("embedding_model", DataType.VARCHAR, max_length=256)
        s.add_field("payload", DataType.JSON)
        s.add_field("vector", DataType.FLOAT_VECTOR, dim=self._dim)
        ip = c.prepare_index_params()
        # FLAT: exact. milvus-lite's HNSW with a user filter missed up to half the true top-k.
        ip.add_index(field_name="vector", index_type="FLAT", metric_type="COSINE")
        c.create_collection(self._collection, schema=s, index_params=ip,
                            consistency_level="Strong")
        log.info("created collection %s (%s, %d dims)", self._collection, self._model, self._dim)

    # -- data --------------------------------------------------------------------
    def _call(self, fn: Callable[[], T]) -> T:
        if self._client is None:
            raise StoreError("store is not open")
        try:
            return fn()
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"Milvus call failed: {exc}") from exc

    @tracing.store_call("insert")
    def insert(self, rows: Sequence[StoredMemory]) -> None:
        """Insert rows whose ids are new. Use `replace` for ids that may exist."""
        self._check_rows(rows)
        data = []
        for row in rows:
            item = to_row(row.record)
            item["vector"] = np.asarray(row.vector, dtype=np.float32).tolist()
            data.append(item)
        for i in range(0, len(data), _BATCH):
            self._insert_chunk(data[i : i + _BATCH])

    def _insert_chunk(self, chunk: list[dict[str, Any]]) -> None:
        for user in {row["user_id"] for row in chunk}:
            self._touch(user)
        self._call(lambda: self._client.insert(self._target, chunk, timeout=self._timeout))

    # Milvus 2.3 makes a Strong read wait for the next time tick (~400 ms measured), and a
    # Session read does not see this client's deletes. So reads are Strong only for users
    # this process wrote to in the last `strong_window_s` seconds (and for that long after
    # open), Bounded otherwise: read-your-writes and deletes stay exact, recall stays fast.
    def touch(self, user_id: str) -> None:
        """Read this user Strong for the next `strong_window_s` seconds: another process
        changed the user's rows (its version moved), so a Bounded read may be stale."""
        self._touch(user_id)

    def _touch(self, user_id: str) -> None:
        now = time.monotonic()
        if len(self._written) > 100_000:
            self._written = {u: t for u, t in self._written.items() if t > now}
        self._written[user_id] = now + self._window

    def _level(self, user_id: str) -> str:
        now = time.monotonic()
        return "Strong" if now < self._strong_until or self._written.get(user_id, 0) > now \
            else "Bounded"

    @tracing.store_call("replace")
    def replace(self, rows: Sequence[StoredMemory]) -> None:
        """Delete-then-insert by id; idempotent, so safe to replay after a crash."""
        self._check_rows(rows)
        by_user: dict[str, list[str]] = {}
        for row in rows:
            by_user.setdefault(row.record.user_id, []).append(row.record.id)
        if len(by_user) == 1:
            for user, ids in by_user.items():
                self.delete(user, ids)
        else:
            self._delete_many({row.record.id: row.record.user_id for row in rows})
        self.insert(rows)

    def _delete_many(self, owners: dict[str, str]) -> None:
        """Bulk writes span many users: find existing ids in one query per chunk instead
        of one per user. An id found under another user is refused, never deleted."""
        ids = list(owners)
        for i in range(0, len(ids), _BATCH):
            chunk = ids[i:i + _BATCH]
            self._call(functools.partial(self._delete_chunk, chunk, owners))

    def _delete_chunk(self, ids: list[str], owners: dict[str, str]) -> None:
        found = self._client.query(self._target, filter=f"id in [{', '.join(map(quote, ids))}]",
                                   output_fields=["id", "user_id"], limit=len(ids),
                                   consistency_level="Strong", timeout=self._timeout)
        for row in found:
            if owners[row["id"]] != row["user_id"]:
                raise StoreError("a row id to replace belongs to another user")
        if found:
            gone = ", ".join(quote(r["id"]) for r in found)
            self._client.delete(self._target, filter=f"id in [{gone}]", timeout=self._timeout)

    def known_hashes(self, wanted: dict[str, set[str]]) -> set[tuple[str, str]]:
        users = sorted(wanted)
        found: set[tuple[str, str]] = set()
        for i in range(0, len(users), 100):
            chunk = users[i:i + 100]
            hashes = sorted({h for u in chunk for h in wanted[u]})
            expr = (f"user_id in [{', '.join(map(quote, chunk))}] and status == \"active\" "
                    f"and content_hash in [{', '.join(map(quote, hashes))}]")
            rows = self._call(functools.partial(
                self._client.query, self._target, filter=expr,
                output_fields=["user_id", "content_hash"], limit=_QUERY_WINDOW,
                consistency_level="Strong", timeout=self._timeout))
            found |= {(r["user_id"], r["content_hash"]) for r in rows
                      if r["content_hash"] in wanted.get(r["user_id"], ())}
        return found

    def user_ids(self) -> list[str]:
        """Every user with at least one row (for jobs that walk all users)."""
        def run() -> list[str]:
            rows = self._client.query(self._target, filter='id != ""',
                                      output_fields=["user_id"], limit=_QUERY_WINDOW,
                                      consistency_level="Strong", timeout=self._timeout)
            if len(rows) < _QUERY_WINDOW:
                return sorted({r["user_id"] for r in rows})
            it = self._client.query_iterator(self._target, batch_size=_BATCH,
                                             filter='id != ""', output_fields=["user_id"],
                                             consistency_level="Strong",
                                             timeout=self._timeout)
            users: set[str] = set()
            try:
                while batch := it.next():
                    users.update(r["user_id"] for r in batch)
            finally:
                it.close()
            return sorted(users)

        return self._call(run)

    def _check_rows(self, rows: Sequence[StoredMemory]) -> None:
        for row in rows:
            if row.vector.shape != (self._dim,):
                raise StoreError(f"vector of shape {row.vector.shape}, expected ({self._dim},)")
            if row.record.embedding_model != self._model:
                raise StoreError(f"row embedded by {row.record.embedding_model}, "
                                 f"collection holds {self._model}")

    @tracing.store_call("delete")
    def delete(self, user_id: str, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        expr = build_filter(user_id, Where(ids=tuple(ids)))
        existing = self._rows(user_id, expr, ["id"], len(ids))
        if existing:
            self._touch(user_id)
            self._call(lambda: self._client.delete(self._target, filter=expr,
                                                   timeout=self._timeout))
        return len(existing)

    @tracing.store_call("delete")
    def delete_user(self, user_id: str) -> int:
        n = self.count(user_id)
        expr = build_filter(user_id, Where())
        self._touch(user_id)
        self._call(lambda: self._client.delete(self._target, filter=expr,
                                               timeout=self._timeout))
        return n

    @tracing.store_call("query")
    def query(self, user_id: str, where: Where, limit: int | None = None) -> list[MemoryRecord]:
        rows = self._rows(user_id, build_filter(user_id, where), list(SCALAR_FIELDS), limit)
        return [from_row(r) for r in rows]

    def list_ids(self, user_id: str, where: Where) -> list[str]:
        rows = self._rows(user_id, build_filter(user_id, where), ["id"], None)
        return sorted(r["id"] for r in rows)

    def _rows(self, user_id: str, expr: str, fields: list[str],
              limit: int | None) -> list[dict[str, Any]]:
        """One query when it fits Milvus' result window, else a query iterator."""
        window = min(limit or _QUERY_WINDOW, _QUERY_WINDOW)
        level = self._level(user_id)
        rows: list[dict[str, Any]] = self._call(lambda: self._client.query(
            self._target, filter=expr, output_fields=fields, limit=window,
            consistency_level=level, timeout=self._timeout))
        if len(rows) < window or (limit is not None and limit <= window):
            return rows
        rows = self._iterate(expr, fields, level)
        return rows if limit is None else rows[:limit]

    def _iterate(self, expr: str, fields: list[str], level: str) -> list[dict[str, Any]]:
        def run() -> list[dict[str, Any]]:
            it = self._client.query_iterator(self._target, batch_size=_BATCH, filter=expr,
                                             output_fields=fields, consistency_level=level,
                                             timeout=self._timeout)
            out: list[dict[str, Any]] = []
            try:
                while batch := it.next():
                    out.extend(batch)
            finally:
                it.close()
            return out

        return self._call(run)

    @tracing.store_call("search")
    def search(
        self, user_id: str, vector: Vector, limit: int, where: Where
    ) -> list[tuple[MemoryRecord, float]]:
        expr = build_filter(user_id, where)
        data = [np.asarray(vector, dtype=np.float32).tolist()]
        res = self._call(lambda: self._client.search(
            self._target, data=data, filter=expr, limit=limit,
            output_fields=list(SCALAR_FIELDS), search_params={"metric_type": "COSINE"},
            consistency_level=self._level(user_id), timeout=self._timeout))
        hits = []
        for hit in res[0]:
            record = from_row(hit["entity"])
            if record.user_id != user_id:  # defence in depth: never cross users
                raise StoreError("store returned a row of another user")
            hits.append((record, float(hit["distance"])))
        return hits

    @tracing.store_call("query")
    def rows(self, user_id: str, where: Where) -> list[StoredMemory]:
        found = self._rows(user_id, build_filter(user_id, where),
                           [*SCALAR_FIELDS, "vector"], None)
        return [StoredMemory(from_row(r), np.asarray(r["vector"], dtype=np.float32))
                for r in found]

    def count(self, user_id: str) -> int:
        return len(self.list_ids(user_id, Where()))

