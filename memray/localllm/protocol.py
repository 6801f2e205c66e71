"""The OpenAI chat-completions protocol, as much of it as memray speaks, over a runtime.

Shared by the HTTP server and the in-process transport, so both answer alike. Like vLLM,
`response_format` `json_schema` (or `json_object` with a `schema`) is enforced with a
grammar; a request this runtime cannot honour is refused with 400, never answered loosely.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Protocol

from memray.localllm.runtime import Completion

DEFAULT_MAX_TOKENS = 512


class Runtime(Protocol):
    n_ctx: int

    def chat(self, messages: list[dict[str, str]], *, schema: dict[str, Any] | None,
             max_tokens: int, temperature: float = 0.0, seed: int = 0) -> Completion: ...


class BadRequestError(ValueError):
    """The request is not one this server can honour (HTTP 400)."""


def error_body(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind}}


def complete(runtime: Runtime, model: str, body: Any) -> dict[str, Any]:
    """One chat completion; raises BadRequestError for what it cannot honour."""
    if not isinstance(body, dict):
        raise BadRequestError("the body must be a JSON object")
    messages = _messages(body.get("messages"))
    schema = _schema(body.get("response_format"))
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS
    temperature = body.get("temperature", 0.0)
    if not isinstance(max_tokens, int) or not 0 < max_tokens <= runtime.n_ctx:
        raise BadRequestError(f"max_tokens must be an integer in 1..{runtime.n_ctx}")
    if not isinstance(temperature, int | float) or not 0 <= temperature <= 2:
        raise BadRequestError("temperature must be a number in 0..2")
    if body.get("n", 1) != 1 or body.get("stream"):
        raise BadRequestError("only n=1 without streaming is supported")
    try:
        done = runtime.chat(messages, schema=schema, max_tokens=max_tokens,
                            temperature=float(temperature), seed=int(body.get("seed") or 0))
    except ValueError as exc:  # the prompt does not fit the context
        raise BadRequestError(str(exc)) from exc
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion",
        "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "finish_reason": done.finish_reason,
                     "message": {"role": "assistant", "content": done.text}}],
        "usage": {"prompt_tokens": done.prompt_tokens,
                  "completion_tokens": done.completion_tokens,
                  "total_tokens": done.prompt_tokens + done.completion_tokens,
                  "prompt_tokens_details": {"cached_tokens": done.cached_tokens}},
    }


def models_body(model: str) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "memray"}]}


def _messages(raw: Any) -> list[dict[str, str]]:
    if not isinstance(raw, list) or not raw:
        raise BadRequestError("messages must be a non-empty list")
    out = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant") \
                or not isinstance(m.get("content"), str):
            raise BadRequestError(f"messages[{i}] needs a role (system, user, assistant) and "
                             "string content")
        out.append({"role": m["role"], "content": m["content"]})
    return out


def _schema(fmt: Any) -> dict[str, Any] | None:
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        raise BadRequestError("response_format must be an object")
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
            raise BadRequestError("response_format json_schema needs json_schema.schema")
        schema: dict[str, Any] = spec["schema"]
        return schema
    if kind == "json_object":
        loose = fmt.get("schema")
        return loose if isinstance(loose, dict) else {"type": "object"}
    raise BadRequestError(f"response_format type {kind!r} is not supported "
                     "(json_schema, json_object, text)")
