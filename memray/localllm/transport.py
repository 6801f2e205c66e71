"""An httpx transport that answers chat completions from a runtime in this process.

`write.extractor: local` uses it, so the LLM extractor speaks the same protocol to the
packaged model as to vLLM, with no socket and no server.
"""

from __future__ import annotations

import json

import httpx

from memray.localllm.protocol import BadRequestError, Runtime, complete, error_body, models_body


class LocalTransport(httpx.BaseTransport):
    def __init__(self, runtime: Runtime, model: str) -> None:
        self._runtime, self._model = runtime, model

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.rstrip("/")
        if request.method == "GET" and path.endswith("/models"):
            return httpx.Response(200, json=models_body(self._model))
        if request.method != "POST" or not path.endswith("/chat/completions"):
            return httpx.Response(404, json=error_body(f"no route {path}", "not_found"))
        try:
            body = json.loads(request.read() or b"null")
            return httpx.Response(200, json=complete(self._runtime, self._model, body))
        except (BadRequestError, json.JSONDecodeError) as exc:
            return httpx.Response(400, json=error_body(str(exc)))
