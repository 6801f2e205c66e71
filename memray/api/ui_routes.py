"""The memory page at `/ui`: a user sees, corrects, exports and clears what is remembered.

Static files only (memray/api/ui/: HTML, one script, one stylesheet; no build step).
Every datum comes from the REST routes, called by the page with the API key the user
signs in with (kept in the tab's sessionStorage, sent as `Authorization: Bearer`), so
scope checks are exactly the REST ones. The page renders memory content as text, never
as HTML, and the Content-Security-Policy allows no inline script besides.
"""

from __future__ import annotations

import functools
from importlib import resources

from fastapi import APIRouter
from starlette.responses import Response

from memray.api.errors import ApiError

_TYPES = {"index.html": "text/html; charset=utf-8",
          "app.js": "text/javascript; charset=utf-8",
          "app.css": "text/css; charset=utf-8"}
_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "connect-src 'self'; img-src 'self'; base-uri 'none'; "
                               "form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
router = APIRouter(include_in_schema=False)


@functools.cache
def _asset(name: str) -> bytes:
    return resources.files("memray.api").joinpath("ui", name).read_bytes()


def _serve(name: str) -> Response:
    return Response(_asset(name), media_type=_TYPES[name], headers=_HEADERS)


@router.get("/ui")
@router.get("/ui/")
def page() -> Response:
    """The page; it asks for an API key and a user id before it shows anything."""
    return _serve("index.html")


@router.get("/ui/{name}")
def asset(name: str) -> Response:
    """The page's script and stylesheet; 404 for any other name."""
    if name not in _TYPES or name == "index.html":
        raise ApiError(404, "not_found", f"no file {name}")
    return _serve(name)
