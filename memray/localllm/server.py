"""`python -m memray.localllm.server`: a packaged model behind an OpenAI-compatible endpoint.

For tests and benchmarks on machines without vLLM: the same protocol vLLM speaks
(`/v1/chat/completions` with `response_format: json_schema`, `/v1/models`), one request
at a time. Not part of memray's serving path. Prints `READY <url>` once it answers.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memray.localllm.models import DEFAULT_MODEL, MODELS, model_path
from memray.localllm.protocol import BadRequestError, Runtime, complete, error_body, models_body

log = logging.getLogger(__name__)


def make_server(runtime: Runtime, model: str, host: str = "127.0.0.1",
                port: int = 0) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            return None

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(200, models_body(model))
            elif self.path == "/health":
                self._send(200, {"status": "ok"})
            else:
                self._send(404, error_body(f"no route {self.path}", "not_found"))

        def do_POST(self) -> None:
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._send(404, error_body(f"no route {self.path}", "not_found"))
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                self._send(200, complete(runtime, model, body))
            except (BadRequestError, json.JSONDecodeError, UnicodeDecodeError) as exc:
                self._send(400, error_body(str(exc)))
            except Exception as exc:  # an engine failure: the client retries on 5xx
                log.exception("completion failed")
                self._send(500, error_body(f"{type(exc).__name__}: {exc}", "server_error"))

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout); nothing to tell it

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m memray.localllm.server", description=__doc__)
    p.add_argument("--model", default=DEFAULT_MODEL, choices=sorted(MODELS))
    p.add_argument("--gguf", help="a GGUF file of your own instead of a packaged model")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0: any free port")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--ctx", type=int, default=4096)
    args = p.parse_args(argv)
    from memray.localllm.runtime import LocalRuntime

    path = args.gguf or str(model_path(args.model))
    runtime = LocalRuntime(path, n_ctx=args.ctx, threads=args.threads)
    name = args.model if not args.gguf else args.gguf
    server = make_server(runtime, name, args.host, args.port)
    port = server.server_address[1]
    print(f"READY http://{args.host}:{port}/v1", flush=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        thread.join()
    except KeyboardInterrupt:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
