"""The one place that maps exceptions to HTTP status codes and `{error, detail}` bodies."""

from __future__ import annotations

import logging

from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse

from memray.errors import (
    ConfigError,
    DimensionMismatchError,
    EmbedderUnavailableError,
    ExtractionError,
    InvalidInputError,
    MemoryNotFoundError,
    StaleReadError,
    StoreError,
    StoreUnavailableError,
)

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An error the API raises itself (auth, limits), with its status and code."""

    def __init__(self, status: int, error: str, detail: object = None) -> None:
        super().__init__(error)
        self.status, self.error, self.detail = status, error, detail


def error_response(exc: Exception) -> JSONResponse:
    """The `{error, detail}` response; an HTTP exception's headers (405's `Allow`) kept."""
    status, error, detail = _classify(exc)
    if status >= 500:
        log.error("request failed: %s: %s", type(exc).__name__, exc)
    headers = exc.headers if isinstance(exc, StarletteHTTPException) else None
    return JSONResponse({"error": error, "detail": detail}, status_code=status, headers=headers)


def _classify(exc: Exception) -> tuple[int, str, object]:
    if isinstance(exc, ApiError):
        return exc.status, exc.error, exc.detail
    if isinstance(exc, RequestValidationError):
        return 422, "validation_error", _reasons(exc)
    if isinstance(exc, StarletteHTTPException):
        return exc.status_code, "http_error", exc.detail
    if isinstance(exc, MemoryNotFoundError):
        return 404, "not_found", str(exc)
    if isinstance(exc, InvalidInputError | ConfigError):
        return 422, "invalid_input", str(exc)
    if isinstance(exc, StaleReadError):
        return 409, "version_not_reached", str(exc)
    if isinstance(exc, ExtractionError):
        return 502, "extraction_failed", str(exc)
    if isinstance(exc, EmbedderUnavailableError):
        return 503, "embedder_unavailable", str(exc)
    if isinstance(exc, DimensionMismatchError):
        return 500, "store_misconfigured", str(exc)
    if isinstance(exc, StoreUnavailableError | StoreError):
        return 503, "store_unavailable", str(exc)
    return 500, "internal_error", None


def _reasons(exc: RequestValidationError) -> list[dict[str, object]]:
    return [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type")}
            for e in exc.errors()]
