"""A llama.cpp model in process (through `cyllama`): chat with a JSON-schema grammar.

Why not cyllama's own `LLM.chat`: it clears the KV cache on every call, and memray's
prompts share a long system prefix; keeping the common token prefix cached roughly halves
a round on a CPU. One context, one caller at a time (llama.cpp contexts are not
thread-safe): the lock serialises callers instead of failing the second one.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    finish_reason: str  # "stop" | "length"
    seconds: float


class RuntimeMissingError(RuntimeError):
    """cyllama (the llama.cpp runtime) is not installed."""


def _llama() -> Any:
    try:
        from cyllama.llama import llama_cpp
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeMissingError(
            "the local LLM needs cyllama: pip install 'memray-ai[local-llm]'") from exc
    return llama_cpp


class LocalRuntime:
    """One GGUF model and one context. `threads`: defaults to the machine's cores."""

    def __init__(self, model_path: str, *, n_ctx: int = 4096, threads: int | None = None,
                 n_batch: int = 512) -> None:
        lib = _llama()
        lib.disable_logging()
        lib.ggml_backend_load_all()
        self._L = lib
        self.path = model_path
        self.model = lib.LlamaModel(model_path, lib.LlamaModelParams())
        self.vocab = self.model.get_vocab()
        params = lib.LlamaContextParams()
        params.n_ctx, params.n_batch, params.n_ubatch = n_ctx, n_batch, n_batch
        n = threads or os.cpu_count() or 1
        params.n_threads, params.n_threads_batch = n, n
        params.no_perf = True
        self.ctx = lib.LlamaContext(self.model, params)
        self.n_ctx, self._n_batch = n_ctx, n_batch
        self._template = self.model.get_default_chat_template()
        self._cached: list[int] = []
        self._grammars: dict[str, str] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self.ctx.close()
        self.model.close()

    def render(self, messages: Sequence[dict[str, str]]) -> str:
        msgs = [self._L.LlamaChatMessage(role=m["role"], content=m["content"]) for m in messages]
        return str(self.model.chat_apply_template(self._template, msgs, True))

    def grammar(self, schema: dict[str, Any]) -> str:
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            self._grammars[key] = self._L.json_schema_to_grammar(schema)
        return self._grammars[key]

    def chat(self, messages: Sequence[dict[str, str]], *, schema: dict[str, Any] | None,
             max_tokens: int, temperature: float = 0.0, seed: int = 0) -> Completion:
        prompt = self.vocab.tokenize(self.render(messages), add_special=True, parse_special=True)
        if len(prompt) + max_tokens > self.n_ctx:
            raise ValueError(f"prompt of {len(prompt)} tokens + max_tokens {max_tokens} exceeds "
                             f"the context of {self.n_ctx} tokens")
        with self._lock:
            start = time.perf_counter()
            cached = self._prefill(prompt)
            out, reason = self._generate(len(prompt), schema, max_tokens, temperature, seed)
            text = self.vocab.detokenize(out, False, False) if out else ""
            return Completion(text, len(prompt), len(out), cached, reason,
                              time.perf_counter() - start)

    def _prefill(self, prompt: list[int]) -> int:
        # Reuse the longest common prefix of what is in the KV cache; at least the last
        # prompt token is decoded again so that its logits are fresh.
        keep = 0
        for a, b in zip(self._cached, prompt[:-1], strict=False):
            if a != b:
                break
            keep += 1
        self.ctx.memory_seq_rm(0, keep, -1)
        self._cached = prompt[:keep]
        for at in range(keep, len(prompt), self._n_batch):
            chunk = prompt[at:at + self._n_batch]
            self.ctx.decode(self._L.llama_batch_get_one(chunk, at))
            self._cached.extend(chunk)
        return keep

    def _generate(self, pos: int, schema: dict[str, Any] | None, max_tokens: int,
                  temperature: float, seed: int) -> tuple[list[int], str]:
        sampler = self._sampler(schema, temperature, seed)
        out: list[int] = []
        try:
            for _ in range(max_tokens):
                token = sampler.sample(self.ctx, -1)
                if self.vocab.is_eog(token):
                    return out, "stop"
                out.append(token)
                self.ctx.decode(self._L.llama_batch_get_one([token], pos))
                self._cached.append(token)
                pos += 1
            return out, "length"
        finally:
            sampler.close()

    def _sampler(self, schema: dict[str, Any] | None, temperature: float, seed: int) -> Any:
        params = self._L.LlamaSamplerChainParams()
        params.no_perf = True
        sampler = self._L.LlamaSampler(params)
        if schema is not None:
            sampler.add_grammar(self.vocab, self.grammar(schema), "root")
        if temperature <= 0:
            sampler.add_greedy()
        else:
            sampler.add_temp(temperature)
            sampler.add_dist(seed)
        return sampler
