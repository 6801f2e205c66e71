"""`LLMExtractor`: facts and ADD/UPDATE/DELETE/NOOP decisions from an OpenAI-compatible chat
endpoint with a JSON schema (vLLM, `ray.serve.llm`, the packaged local model, or any
compatible server).

The rule extractor stands in front: it recognises forget commands (handled without the
LLM) and urgency. Existing memories are shown under small integer ids, never raw ids.
Timeouts, HTTP errors and answers that break the schema or name an id that was not shown
are retried, then raise ExtractionError; nothing is written in that case, because
resolution only starts after a valid answer. Retries sample at a small temperature: at
temperature 0 a model repeats the same wrong answer.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from memray import tracing
from memray.config import LLMConfig
from memray.errors import ExtractionError
from memray.extract.base import Extraction, Fact, Judge, Turn
from memray.extract.llm_prompt import (
    FACTS_SCHEMA,
    OPS,
    SOURCES,
    SUMMARY_SCHEMA,
    TYPES,
    VERDICT_SCHEMA,
    messages,
    response_format,
)
from memray.extract.rules import RuleExtractor, says_nothing_about_user
from memray.hanzi import simplified
from memray.models import MemoryRecord, MemorySource, MemoryType

log = logging.getLogger(__name__)

_MAX_CONTENT = 400
# An LLM fact carries no calibrated confidence of its own (the schema leaves it out to keep
# answers short); this is what resolution and ranking see.
LLM_CONFIDENCE = 0.8


@dataclass
class Usage:
    """What the endpoint reported, summed over calls (the bench reads it)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    seconds: float = 0.0
    ungrounded: int = 0


TOTAL = Usage()  # every LLMExtractor of the process adds here too (the bench reads it)
_total_lock = threading.Lock()


class LLMExtractor:
    """`Extractor` over an OpenAI-compatible endpoint. `transport` is the seam for an
    in-process model (memray.localllm.transport) and for tests."""

    wants_existing = True

    def __init__(self, cfg: LLMConfig, *, front: RuleExtractor | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        self._cfg, self._front = cfg, front or RuleExtractor()
        headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
        self._client = httpx.Client(base_url=cfg.base_url.rstrip("/") + "/",
                                    timeout=cfg.timeout_s, headers=headers,
                                    transport=transport)
        self.usage = Usage()
        self._usage_lock = threading.Lock()

    def close(self) -> None:
        self._client.close()

    def is_urgent(self, text: str) -> bool:
        return self._front.is_urgent(text)

    def grey_band_judge(self) -> Judge | None:
        return self.judge

    def extract(self, turns: Sequence[Turn], existing: Sequence[MemoryRecord]) -> Extraction:
        commands, rest = split_round(self._front, turns, existing)
        if not rest:
            return commands
        facts, dropped = self._ask(self._prompt(rest, existing), FACTS_SCHEMA, "memray_facts",
                                   lambda raw: read_facts(raw, existing, rest),
                                   self._cfg.max_tokens)
        if dropped:
            with self._usage_lock:
                self.usage.ungrounded += dropped
        return Extraction(facts=facts, forgets=commands.forgets)

    def judge(self, fact: Fact, record: MemoryRecord) -> bool:
        """Grey-band judge: do the two statements say the same thing about the user?"""
        prompt = (f"Statement A: {fact.content}\nStatement B: {record.content}\n"
                  "Do A and B state the same fact about the user (B may be an older "
                  "version of A)? Answer JSON {\"same_fact\": true|false}.")
        return bool(self._ask([{"role": "user", "content": prompt}], VERDICT_SCHEMA,
                              "memray_judge", _verdict, 16))

    def summarize(self, statements: Sequence[str], max_chars: int) -> str:
        """One statement that keeps what the given statements about the user say."""
        listing = "\n".join(f"- {s}" for s in statements)
        prompt = (f"These statements are about one user:\n{listing}\nWrite one statement "
                  f"of at most {max_chars} characters that keeps every fact in them, in "
                  "their language. Answer JSON {\"summary\": \"...\"}.")
        text = self._ask([{"role": "user", "content": prompt}], SUMMARY_SCHEMA,
                         "memray_summary", _summary, max(32, max_chars))
        return str(text)[:max_chars]

    @staticmethod
    def _prompt(turns: Sequence[Turn], existing: Sequence[MemoryRecord]) -> list[dict[str, str]]:
        return messages([m.content for m in existing], [(t.role, t.content) for t in turns])

    def _ask(self, messages: list[dict[str, str]], schema: dict[str, Any], name: str,
             parse: Any, max_tokens: int) -> Any:
        last = "no attempt"
        for attempt in range(self._cfg.max_retries + 1):
            if attempt:
                time.sleep(min(0.2 * 2 ** attempt, 2.0))
            body = {"model": self._cfg.model, "messages": messages, "max_tokens": max_tokens,
                    "temperature": 0 if attempt == 0 else 0.3, "seed": attempt,
                    "response_format": response_format(schema, name)}
            try:
                return parse(self._once(body))
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            except RetryableError as exc:
                last = str(exc)
            log.warning("LLM call failed (attempt %d): %s", attempt + 1, last)
        raise ExtractionError(f"LLM extraction failed after {self._cfg.max_retries + 1} "
                              f"attempts: {last}")

    def _once(self, body: dict[str, Any]) -> Any:
        start = time.perf_counter()
        with tracing.chat(self._cfg.model, self._cfg.base_url, body["messages"]) as span:
            resp = self._client.post("chat/completions", json=body)
            if resp.status_code >= 500 or resp.status_code == 429:
                raise RetryableError(f"HTTP {resp.status_code}")
            if resp.status_code >= 400:
                raise ExtractionError(f"LLM endpoint refused the request: HTTP "
                                      f"{resp.status_code}: {resp.text[:300]}")
            try:
                answer = resp.json()
                tracing.chat_answer(span, answer)
                self._count(answer.get("usage") or {}, time.perf_counter() - start)
                choice = answer["choices"][0]
                content = choice["message"]["content"]
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                raise RetryableError(f"not a chat completion: {str(exc)[:200]}") from exc
            if choice.get("finish_reason") == "length":
                raise RetryableError("answer cut off at max_tokens")
            try:
                return json.loads(content)
            except (TypeError, json.JSONDecodeError) as exc:
                raise RetryableError(f"answer is not JSON: {str(exc)[:200]}") from exc

    def _count(self, usage: dict[str, Any], seconds: float) -> None:
        details = usage.get("prompt_tokens_details") or {}
        for total, lock in ((self.usage, self._usage_lock), (TOTAL, _total_lock)):
            with lock:
                total.calls += 1
                total.prompt_tokens += int(usage.get("prompt_tokens") or 0)
                total.completion_tokens += int(usage.get("completion_tokens") or 0)
                total.cached_tokens += int(details.get("cached_tokens") or 0)
                total.seconds += seconds


def split_round(front: RuleExtractor, turns: Sequence[Turn],
                existing: Sequence[MemoryRecord]) -> tuple[Extraction, list[Turn]]:
    """The rules' commands (forgets), and the turns left for the LLM: none when no user
    turn is left. A user turn that only asks about the world cannot hold a fact about the
    user; a model asked anyway may keep the question (small ones do), and it costs a call."""
    commands = front.extract(turns, existing)
    forget_turns = {f.turn_id for f in commands.forgets}
    rest = [t for t in turns if t.id not in forget_turns
            and not (t.role == "user" and says_nothing_about_user(t.content))]
    if not any(t.role == "user" for t in rest):
        rest = []
    return Extraction(forgets=commands.forgets), rest


def facts_request(model: str, turns: Sequence[Turn], existing: Sequence[MemoryRecord],
                  max_tokens: int) -> dict[str, Any]:
    """The chat-completions body of one extraction (first attempt)."""
    return {"model": model, "max_tokens": max_tokens, "temperature": 0, "seed": 0,
            "messages": messages([m.content for m in existing],
                                 [(t.role, t.content) for t in turns]),
            "response_format": response_format(FACTS_SCHEMA, "memray_facts")}


def read_facts(raw: Any, existing: Sequence[MemoryRecord],
               turns: Sequence[Turn]) -> tuple[list[Fact], int]:
    """The facts of a parsed answer, checked; and how many were dropped as having nothing
    in what the user said this round to show for them (`_evidenced`)."""
    facts = _facts(raw, existing, turns)
    said = " ".join(t.content for t in turns if t.role == "user")
    shown = {m.id: m for m in existing}
    kept = [f for f in facts if _evidenced(f, shown, said)]
    if len(kept) < len(facts):
        log.info("dropped %d fact(s) that share no word with the user's turns",
                 len(facts) - len(kept))
    return kept, len(facts) - len(kept)


def _evidenced(fact: Fact, shown: dict[str, MemoryRecord], said: str) -> bool:
    """A NOOP claims the user restated memory [n], a DELETE that they took it back: either
    way something of [n] (its words or its slot's) is in what they said. A new or changed
    fact the user stated must be in their words too; an inference need not (it waits on
    probation instead)."""
    if fact.op in ("NOOP", "DELETE"):
        target = shown.get(fact.target or "")
        about = f"{target.content} {(target.slot or '').replace(':', ' ')}" if target else ""
        return grounded(about, said)
    return fact.source is MemorySource.INFERRED or grounded(fact.content, said)


class RetryableError(Exception):
    """A failure worth another attempt (5xx, 429, malformed or out-of-range answers)."""


def _field(item: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = item.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RetryableError(f"fact field {key!r} is missing or of the wrong type")
    return value


def _facts(raw: Any, existing: Sequence[MemoryRecord], turns: Sequence[Turn]) -> list[Fact]:
    """What the grammar cannot promise, checked here: enums, ids in range, lengths."""
    items = raw.get("facts") if isinstance(raw, dict) else None
    if not isinstance(items, list) or set(raw) != {"facts"}:
        raise RetryableError("answer must be {\"facts\": [...]} and nothing else")
    known = {f"t{i}": t.id for i, t in enumerate(turns)}
    users = tuple(t.id for t in turns if t.role == "user")
    out = []
    for item in items:
        if not isinstance(item, dict):
            raise RetryableError("each fact must be an object")
        op, mtype, source = (_field(item, k, str) for k in ("op", "type", "source"))
        if op not in OPS or mtype not in TYPES or source not in SOURCES:
            raise RetryableError(f"op {op!r}, type {mtype!r} or source {source!r} is not "
                                  f"one of {OPS}, {TYPES}, {SOURCES}")
        content = _field(item, "content", str).strip()
        if not content:
            raise RetryableError("a fact with empty content")
        idx = _field(item, "id", int)
        target = None
        if idx == -1 and op != "ADD":
            if op != "UPDATE":
                continue  # confirming or deleting nothing: no change
            op = "ADD"  # a change to no shown memory is a new fact; resolution still
            # compares it with all of the user's memories
        if op != "ADD":
            if not 0 <= idx < len(existing):
                shown = f"[0]..[{len(existing) - 1}]" if existing else "none"
                raise RetryableError(f"{op} names memory [{idx}], but the memories shown "
                                      f"were {shown}")
            target = existing[idx].id
            if op == "UPDATE" and content == existing[idx].content.strip():
                op = "NOOP"  # restating a memory unchanged is not a change
        importance = min(1.0, max(0.0, float(_field(item, "importance", (int, float)))))
        # Slots are keys, read in Simplified as the rules' are ("like:爵士樂" is "like:爵士乐")
        slot = simplified(_field(item, "slot", str).strip().lower()[:80]) or None
        turn_ids = tuple(known[t] for t in _field(item, "turns", list)
                         if isinstance(t, str) and t in known) or users
        # An ADD only says the LLM saw no related memory among those shown; resolution
        # still compares it with all of the user's memories (and asks `judge` in the grey
        # band), so duplicates it could not see are caught.
        out.append(Fact(content=content[:_MAX_CONTENT], type=MemoryType(mtype),
                        importance=importance, confidence=LLM_CONFIDENCE,
                        source=MemorySource(source), slot=slot, turn_ids=turn_ids,
                        excerpt=content[:200], op=None if op == "ADD" else op,
                        target=target))
    return out


_WORD = re.compile(r"[^\W\d_]{3,}|\d+", re.UNICODE)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_FILLER = frozenset((
    "the", "and", "for", "with", "has", "have", "had", "was", "were", "are", "his", "her",
    "their", "its", "user", "likes", "like", "lives", "works", "not", "does", "don", "into",
    "from", "that", "this"))


def _keys(text: str) -> set[str]:
    low = text.lower()
    words = {w for w in _WORD.findall(_CJK.sub(" ", low)) if w not in _FILLER}
    bigrams = {run[i:i + 2] for run in _CJK.findall(low) for i in range(len(run) - 1)}
    return words | bigrams


def grounded(content: str, said: str) -> bool:
    """Whether a new or changed fact shares a word (or, in Chinese, two adjacent characters)
    with what the user said this round. A model may restate, shorten or infer, but a fact
    with nothing in common with the user's words came from somewhere else: the examples,
    another memory, or nowhere. Facts with no checkable word pass."""
    keys = _keys(content)
    return not keys or bool(keys & _keys(said))


def _verdict(raw: Any) -> bool:
    if not isinstance(raw, dict) or not isinstance(raw.get("same_fact"), bool):
        raise RetryableError("verdict must be {\"same_fact\": true|false}")
    return bool(raw["same_fact"])


def _summary(raw: Any) -> str:
    text = raw.get("summary") if isinstance(raw, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise RetryableError("summary must be {\"summary\": \"<non-empty text>\"}")
    return text.strip()
