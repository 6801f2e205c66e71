"""Backfill extraction the Ray Data LLM way: one row per conversation round, sent through
a `ray.data.llm` processor, then gathered back into one unit per user.

- `http` (CPU clusters, or a live endpoint): `HttpRequestProcessorConfig` against the
  OpenAI-compatible endpoint of `write.llm`, with bounded concurrency and QPS, the
  processor's own retries on 429/5xx and lost connections;
- `vllm` (GPU clusters): `vLLMEngineProcessorConfig`, the engine inside the job, the same
  messages and JSON schema as guided decoding.

The rules run first, per round, as online (forget commands, questions that say nothing
about the user). An answer that is refused, not JSON, or breaks the schema is recorded:
the session it belongs to is left unmarked, so the next run extracts it again, and its
other rounds are not written (a session is written whole or not at all).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pandas as pd

from memray.batch.config import LLMStageArgs
from memray.batch.stages import by_user, parse_group
from memray.config import MemoryConfig
from memray.extract.base import Turn
from memray.extract.llm import facts_request, read_facts, split_round
from memray.extract.llm_prompt import FACTS_SCHEMA
from memray.extract.rules import RuleExtractor
from memray.ingest.units import fact_json, plan_rounds, sessions_todo

_LIGHT = 0.25
_COLUMNS = ["user_id", "meta", "round", "body", "facts", "llm_error"]


def rounds_of_user(group: pd.DataFrame, *, memory: dict[str, Any],
                   done: frozenset[str]) -> pd.DataFrame:
    """map_groups: one user's log rows -> one row per round still to extract, each with
    the chat request the LLM must answer ("" when the rules decided the round alone)."""
    cfg = MemoryConfig.model_validate(memory)
    turns, invalid, error = parse_group(group, cfg)
    user = str(group["user_id"].iloc[0])
    keys, todo = sessions_todo(turns, done) if turns else ([], [])
    meta = json.dumps({"rows": len(group), "invalid": invalid, "error": error,
                       "sessions": keys, "turns": sum(len(ts) for ts in todo)})
    out: list[dict[str, Any]] = []
    front = RuleExtractor()
    model = cfg.write.llm.model if cfg.write.llm else cfg.write.local_llm.model
    max_tokens = cfg.write.llm.max_tokens if cfg.write.llm else cfg.write.local_llm.max_tokens
    for key, sid, ts_ms, round_turns in plan_rounds(todo, keys):
        commands, rest = split_round(front, round_turns, [])
        body = json.dumps(facts_request(model, rest, [], max_tokens)) if rest else ""
        out.append({"user_id": user, "meta": "", "body": body, "facts": "[]", "llm_error": "",
                    "round": json.dumps({
                        "session": key, "session_id": sid, "ts_ms": ts_ms,
                        "turns": [[t.id, t.role, t.content] for t in rest],
                        "forgets": [g.__dict__ for g in commands.forgets]})})
    if out:
        out[0]["meta"] = meta
    else:  # nothing to extract: the user still reports what was read
        out.append({"user_id": user, "meta": meta, "round": "", "body": "", "facts": "[]",
                    "llm_error": ""})
    return pd.DataFrame(out, columns=_COLUMNS)


def parse_answer(row: dict[str, Any]) -> dict[str, Any]:
    """postprocess: the endpoint's answer -> the round's facts (JSON), or the error."""
    out = {k: row[k] for k in _COLUMNS if k in row}
    out["facts"], out["llm_error"] = "[]", ""
    try:
        turns = [Turn(*t) for t in json.loads(row["round"])["turns"]]
        answer = _content(row)
        facts, _ = read_facts(json.loads(answer), [], turns)
        out["facts"] = json.dumps([fact_json(f) for f in facts], ensure_ascii=False)
    except Exception as exc:  # recorded per row; the session is retried next run
        out["llm_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return out


def _content(row: dict[str, Any]) -> str:
    if "http_response" in row:  # the OpenAI-compatible endpoint's JSON
        resp = row["http_response"]
        if isinstance(resp, str):
            resp = json.loads(resp)
        if "error" in resp and "choices" not in resp:
            raise ValueError(f"endpoint refused: {resp['error']}")
        choice = resp["choices"][0]
        if choice.get("finish_reason") == "length":
            raise ValueError("answer cut off at max_tokens")
        return str(choice["message"]["content"])
    return str(row["generated_text"])  # the vLLM engine processor's output


def unit_of_user(group: pd.DataFrame) -> pd.DataFrame:
    """map_groups: one user's extracted rounds -> the unit the writer expects (as
    stages.units_of_user builds it), without the sessions that have a failed round."""
    rows = group.to_dict("records")
    meta = json.loads(next(r["meta"] for r in rows if r["meta"]))
    failed = {json.loads(r["round"])["session"]: r["llm_error"] for r in rows
              if r["round"] and r["llm_error"]}
    rounds = []
    per_session: dict[str, int] = defaultdict(int)
    for r in rows:
        if not r["round"]:
            continue
        rnd = json.loads(r["round"])
        if rnd["session"] in failed:
            continue
        per_session[rnd["session"]] += 1
        rounds.append({"session_id": rnd["session_id"], "ts_ms": rnd["ts_ms"],
                       "facts": json.loads(r["facts"]), "forgets": rnd["forgets"]})
    sessions = [k for k in meta["sessions"] if k not in failed]
    unit = {"user_id": str(rows[0]["user_id"]), "sessions": sessions,
            "turns": meta["turns"],
            "rounds": sorted(rounds, key=lambda x: (x["ts_ms"], x["session_id"]))}
    error = meta["error"] or next(iter(failed.values()), "")
    return pd.DataFrame({"unit": [json.dumps(unit) if sessions else ""],
                         "rows": [meta["rows"]], "invalid": [meta["invalid"]],
                         "error": [error], "llm_failed_sessions": [len(failed)]})


def extract_with_llm(ds: Any, args: LLMStageArgs, memory: MemoryConfig,
                     done: frozenset[str], partitions: int) -> Any:
    """The rounds of every user through the LLM processor, back to units per user."""
    # Fractional CPUs: the HTTP stage waits on the endpoint, and the embedding pool holds
    # whole CPUs for the job; tasks asking for a whole CPU would wait forever on 2 cores.
    rounds = by_user(ds, partitions).map_groups(
        rounds_of_user, batch_format="pandas", num_cpus=_LIGHT,
        fn_kwargs={"memory": memory.model_dump(mode="json"), "done": done}).materialize()
    # Materialized: the two branches below read it, and an unmaterialized source would
    # be read (and shuffled) twice, each branch holding back the other's CPU budget.
    asks = rounds.filter(lambda r: r["body"] != "", num_cpus=_LIGHT)
    rest = rounds.filter(lambda r: r["body"] == "", num_cpus=_LIGHT)
    answered = build(args, memory)(asks).select_columns(_COLUMNS)
    return by_user(answered.union(rest), partitions).map_groups(
        unit_of_user, batch_format="pandas", num_cpus=_LIGHT)


def build(args: LLMStageArgs, memory: MemoryConfig) -> Any:
    """The `ray.data.llm` processor for this job (built, not run)."""
    from ray.data.llm import build_processor

    return build_processor(processor_config(args, memory),
                           preprocess=_preprocess(args.processor),
                           postprocess=parse_answer,
                           preprocess_map_kwargs={"num_cpus": _LIGHT},
                           postprocess_map_kwargs={"num_cpus": _LIGHT})


def processor_config(args: LLMStageArgs, memory: MemoryConfig) -> Any:
    from ray.data import llm as data_llm

    if args.processor == "http":
        llm = memory.write.llm
        if llm is None:
            raise ValueError("the http LLM stage needs write.llm (base_url, model)")
        headers = {"Authorization": f"Bearer {llm.api_key}"} if llm.api_key else {}
        return data_llm.HttpRequestProcessorConfig(
            url=llm.base_url.rstrip("/") + "/chat/completions", headers=headers,
            concurrency=args.concurrency, batch_size=args.batch_size, qps=args.qps,
            max_retries=args.max_retries, http_request_stage={"num_cpus": _LIGHT})
    return data_llm.vLLMEngineProcessorConfig(
        model_source=args.model_source, engine_kwargs=args.engine_kwargs,
        concurrency=args.concurrency, batch_size=args.batch_size,
        accelerator_type=args.accelerator_type)


def _preprocess(processor: str) -> Any:
    if processor == "http":
        return lambda row: {**row, "payload": json.loads(row["body"])}
    return _vllm_row


def _vllm_row(row: dict[str, Any]) -> dict[str, Any]:
    body = json.loads(row["body"])
    return {**row, "messages": body["messages"],
            "sampling_params": {"temperature": 0, "max_tokens": body["max_tokens"],
                                "guided_decoding": {"json": FACTS_SCHEMA}}}
