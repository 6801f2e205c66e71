"""Which extractor a config asks for, built in one place (the write path, the profile and
the nightly merge all ask here)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from memray.config import LLMConfig, LocalLLMConfig, WriteConfig
from memray.extract.base import Extractor
from memray.extract.rules import RuleExtractor

if TYPE_CHECKING:
    from memray.extract.llm import LLMExtractor

_runtimes: dict[tuple[Any, ...], Any] = {}
_runtimes_lock = threading.Lock()


def build_extractor(write: WriteConfig) -> Extractor:
    llm = open_llm(write)
    return llm if llm is not None else RuleExtractor()


def open_llm(write: WriteConfig) -> LLMExtractor | None:
    """The LLM the config names (an endpoint, or the packaged model in process), or None
    when the rules decide alone. The caller closes it."""
    from memray.extract.llm import LLMExtractor

    if write.uses == "llm":
        assert write.llm is not None
        return LLMExtractor(write.llm, front=RuleExtractor())
    if write.uses == "local":
        from memray.localllm.transport import LocalTransport

        local = write.local_llm
        cfg = LLMConfig(base_url="http://local/v1", model=local.gguf or local.model,
                        timeout_s=3600, max_retries=local.max_retries,
                        max_tokens=local.max_tokens)
        return LLMExtractor(cfg, front=RuleExtractor(),
                            transport=LocalTransport(local_runtime(local), cfg.model))
    return None


def local_runtime(local: LocalLLMConfig) -> Any:
    """One loaded model per process and settings: the weights are shared by every Memory."""
    key = (local.gguf, local.model, local.threads, local.context_tokens)
    with _runtimes_lock:
        if key not in _runtimes:
            from memray.localllm.models import model_path
            from memray.localllm.runtime import LocalRuntime

            path = local.gguf or str(model_path(local.model))
            _runtimes[key] = LocalRuntime(path, n_ctx=local.context_tokens,
                                          threads=local.threads)
        return _runtimes[key]
