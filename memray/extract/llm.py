"""`LLMExtractor`: facts and ADD/UPDATE/DELETE/NOOP decisions from an OpenAI-compatible chat
endpoint with a JSON schema (vLLM, `ray.serve.llm`, or any compatible server).

The rule extractor stands in front: it recognises forget commands (handled without the
LLM) and urgency. Existing memories are shown under small integer ids, never raw ids.
Timeouts, HTTP errors and invalid JSON are retried, then raise ExtractionError; nothing
is written in that case, because resolution only starts after a valid answer.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memray import tracing
from memray.config import LLMConfig
from memray.errors import ExtractionError
from memray.extract.base import Extraction, Fact, Judge, Turn
from memray.extract.rules import RuleExtractor
from memray.models import MemoryRecord, MemorySource, MemoryType

log = logging.getLogger(__name__)

SYSTEM_PROMPT = """You maintain long-term memory about ONE user for an assistant.
From the conversation, extract facts about the user worth remembering across sessions.
Keep a fact only if it meets at least two of: specific; will affect a later decision;
long-lived. Never keep small talk, one-off questions, greetings, or the assistant's own
words or reasoning. One short fact per item, in the user's language.
Compare each fact with the EXISTING memories (shown as [id] text):
- ADD: new fact (id null)
- UPDATE: it changes or refines existing memory [id] (the new content replaces it)
- DELETE: the user says existing memory [id] is no longer true and gives no replacement
- NOOP: existing memory [id] already says it
type is one of identity, preference, constraint, fact, task_state, behavior.
source is user_stated when the user said it, inferred when you concluded it.
turn_ids lists the [t<n>] labels of the turns the fact comes from.
importance and confidence are 0..1. slot names what the fact is about (city, job,
availability, name, diet, like:<thing>, dislike:<thing>, family:<relation>) or null.
Answer with JSON only."""

_TYPES = ["identity", "preference", "constraint", "fact", "task_state", "behavior"]


class _LLMFact(BaseModel):
    model_config = ConfigDict(extra="forbid")

    op: Literal["ADD", "UPDATE", "DELETE", "NOOP"]
    id: int | None = None
    content: str = Field(min_length=1, max_length=400)
    type: Literal["identity", "preference", "constraint", "fact", "task_state", "behavior"]
    importance: float = Field(ge=0, le=1)
    confidence: float = Field(ge=0, le=1)
    source: Literal["user_stated", "inferred"] = "user_stated"
    slot: str | None = Field(None, max_length=80)
    turn_ids: list[str] = Field(default_factory=list)


class _LLMAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    facts: list[_LLMFact]


class _Summary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    summary: str


class _Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    same_fact: bool


def _schema(model: type[BaseModel], name: str) -> dict[str, Any]:
    return {"type": "json_schema",
            "json_schema": {"name": name, "schema": model.model_json_schema(), "strict": True}}


class LLMExtractor:
    """`Extractor` over an OpenAI-compatible endpoint. `transport` is the test seam."""

    wants_existing = True

    def __init__(self, cfg: LLMConfig, *, front: RuleExtractor | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        self._cfg, self._front = cfg, front or RuleExtractor()
        headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
        self._client = httpx.Client(base_url=cfg.base_url.rstrip("/") + "/",
                                    timeout=cfg.timeout_s, headers=headers,
                                    transport=transport)

    def close(self) -> None:
        self._client.close()

    def is_urgent(self, text: str) -> bool:
        return self._front.is_urgent(text)

    def grey_band_judge(self) -> Judge | None:
        return self.judge

    def extract(self, turns: Sequence[Turn], existing: Sequence[MemoryRecord]) -> Extraction:
        commands = self._front.extract(turns, existing)
        forget_turns = {f.turn_id for f in commands.forgets}
        rest = [t for t in turns if t.id not in forget_turns]
        if not any(t.role == "user" for t in rest):
            return Extraction(forgets=commands.forgets)
        answer = self._ask(self._prompt(rest, existing), _LLMAnswer, "memray_facts")
        assert isinstance(answer, _LLMAnswer)
        return Extraction(facts=[self._fact(f, existing, rest) for f in answer.facts],
                          forgets=commands.forgets)

    def judge(self, fact: Fact, record: MemoryRecord) -> bool:
        """Grey-band judge: do the two statements say the same thing about the user?"""
        prompt = (f"Statement A: {fact.content}\nStatement B: {record.content}\n"
                  "Do A and B state the same fact about the user (B may be an older "
                  "version of A)? Answer JSON {\"same_fact\": true|false}.")
        verdict = self._ask([{"role": "user", "content": prompt}], _Verdict, "memray_judge")
        assert isinstance(verdict, _Verdict)
        return verdict.same_fact

    def summarize(self, statements: Sequence[str], max_chars: int) -> str:
        """One statement that keeps what the given statements about the user say."""
        listing = "\n".join(f"- {s}" for s in statements)
        prompt = (f"These statements are about one user:\n{listing}\nWrite one statement "
                  f"of at most {max_chars} characters that keeps every fact in them. Answer "
                  "JSON {\"summary\": \"...\"}.")
        answer = self._ask([{"role": "user", "content": prompt}], _Summary, "memray_summary")
        assert isinstance(answer, _Summary)
        text = answer.summary.strip()[:max_chars]
        if not text:
            raise ExtractionError("LLM returned an empty summary")
        return text

    @staticmethod
    def _prompt(turns: Sequence[Turn], existing: Sequence[MemoryRecord]) -> list[dict[str, str]]:
        memories = "\n".join(f"[{i}] {m.content}" for i, m in enumerate(existing)) or "(none)"
        convo = "\n".join(f"[t{i}] {t.role}: {t.content}" for i, t in enumerate(turns))
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"EXISTING:\n{memories}\n\nCONVERSATION:\n{convo}"}]

    def _fact(self, f: _LLMFact, existing: Sequence[MemoryRecord],
              turns: Sequence[Turn]) -> Fact:
        target = None
        if f.op != "ADD":
            if f.id is None or not 0 <= f.id < len(existing):
                raise ExtractionError(f"LLM referred to unknown memory id {f.id!r}")
            target = existing[f.id].id
        known = {f"t{i}": t.id for i, t in enumerate(turns)}
        turn_ids = tuple(known[t] for t in f.turn_ids if t in known) or tuple(
            t.id for t in turns if t.role == "user")
        # An ADD only says the LLM saw no related memory among those shown; resolution
        # still compares it with all of the user's memories (and asks `judge` in the grey
        # band), so duplicates it could not see are caught.
        return Fact(content=f.content.strip(), type=MemoryType(f.type), importance=f.importance,
                    confidence=f.confidence, source=MemorySource(f.source), slot=f.slot,
                    turn_ids=turn_ids, excerpt=f.content[:200],
                    op=None if f.op == "ADD" else f.op, target=target)

    def _ask(self, messages: list[dict[str, str]], model: type[BaseModel],
             name: str) -> BaseModel:
        body = {"model": self._cfg.model, "messages": messages, "temperature": 0,
                "response_format": _schema(model, name)}
        last = "no attempt"
        for attempt in range(self._cfg.max_retries + 1):
            if attempt:
                time.sleep(min(0.2 * 2 ** attempt, 2.0))
            try:
                return self._once(body, model)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            except _RetryableError as exc:
                last = str(exc)
            log.warning("LLM call failed (attempt %d): %s", attempt + 1, last)
        raise ExtractionError(f"LLM extraction failed after {self._cfg.max_retries + 1} "
                              f"attempts: {last}")

    def _once(self, body: dict[str, Any], model: type[BaseModel]) -> BaseModel:
        with tracing.chat(self._cfg.model, self._cfg.base_url, body["messages"]) as span:
            resp = self._client.post("chat/completions", json=body)
            if resp.status_code >= 500 or resp.status_code == 429:
                raise _RetryableError(f"HTTP {resp.status_code}")
            if resp.status_code >= 400:
                raise ExtractionError(f"LLM endpoint refused the request: "
                                      f"HTTP {resp.status_code}")
            try:
                answer = resp.json()
                tracing.chat_answer(span, answer)
                content = answer["choices"][0]["message"]["content"]
                return model.model_validate(json.loads(content))
            except (KeyError, IndexError, TypeError, json.JSONDecodeError,
                    ValidationError) as exc:
                raise _RetryableError(f"invalid answer: {str(exc)[:200]}") from exc


class _RetryableError(Exception):
    """A failure worth another attempt (5xx, 429, malformed JSON)."""
