"""The memory page at /ui end to end: headless Chromium (Debian's `chromium`, driven by
Python Playwright) against the REST API served by uvicorn on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_api_http import ADMIN, ALICE, TEAM, Served, auth

from memray import Memory, MemoryConfig
from memray.embed.cache import CachedEmbedder

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # the browser tests skip; the served-page test still runs
    expect = sync_playwright = None

XSS = '<img src=x onerror="window.__xss = 1"><script>window.__xss = 2</script>'


def chromium_path() -> str | None:
    found = os.environ.get("MEMRAY_CHROMIUM") or shutil.which("chromium") \
        or shutil.which("chromium-browser")
    return found if found and Path(found).exists() else None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if sync_playwright is None:
        pytest.skip("needs Python Playwright (pip install playwright; it drives the system "
                    "chromium, so skip `playwright install`)")
    exe = chromium_path()
    if exe is None:
        pytest.skip("no chromium binary: install Debian's with `apt-get install -y chromium` "
                    "(or set MEMRAY_CHROMIUM to a Chromium executable)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def served(tmp_path: Path, embedder: CachedEmbedder) -> Iterator[tuple[httpx.Client, str]]:
    with Memory(MemoryConfig(data_dir=str(tmp_path / "d")), embedder=embedder) as memory, \
            Served(memory) as http:
        yield http, str(http.base_url)


@pytest.fixture
def page(browser: Any, served: tuple[httpx.Client, str]) -> Iterator[Any]:
    context = browser.new_context(base_url=served[1], accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


def seed(http: httpx.Client, user: str, *texts: str) -> list[str]:
    ids = []
    for text in texts:
        r = http.post("/v1/memories", headers=auth(ADMIN),
                      json={"user_id": user, "messages": text, "infer": False})
        assert r.status_code == 200, r.text
        ids.append(r.json()["events"][0]["memory_id"])
    return ids


def sign_in(page: Any, key: str, user: str) -> None:
    page.goto("/ui")
    page.fill("#key", key)
    page.fill("#user", user)
    page.click("#sign-in-form button[type=submit]")


def contents(page: Any) -> list[str]:
    return [str(t) for t in page.locator("#rows td.content").all_text_contents()]


def shot(page: Any, path: Path) -> None:
    page.screenshot(path=str(path), full_page=True)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


def test_a_user_pages_and_searches_their_memories_shown_as_text(
        page: Any, served: tuple[httpx.Client, str], tmp_path: Path) -> None:
    http, _ = served
    seed(http, "alice", "I live in Shanghai", "I like jazz", XSS)
    seed(http, "bob", "Bob's secret plan")
    requests: list[Any] = []
    page.on("request", lambda r: requests.append(r))  # noqa: PLW0108 (no builtins here)

    sign_in(page, ALICE, "alice")
    expect(page.locator("#rows tr")).to_have_count(3)
    page.fill("#page-size", "2")
    page.dispatch_event("#page-size", "change")
    expect(page.locator("#rows tr")).to_have_count(2)
    assert contents(page) == ["I live in Shanghai", "I like jazz"]
    page.click("#next")
    page.wait_for_selector("#prev:not([disabled])")
    assert contents(page) == [XSS]  # shown as text, never as markup
    assert page.locator("#list img, #list script").count() == 0
    assert page.evaluate("window.__xss") is None
    assert page.locator("#next").is_disabled()
    row = page.locator("#rows tr").first
    assert row.locator("td.type").text_content() == "message"
    assert row.locator("td.state").text_content() == "active"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", row.locator("td.created").inner_text())
    shot(page, tmp_path / "list.png")
    page.click("#prev")
    expect(page.locator("#rows td.content").first).to_have_text("I live in Shanghai")

    page.fill("#query", "jazz music")
    page.click("#search-form button[type=submit]")
    page.wait_for_selector("#show-all:not([hidden])")
    assert contents(page)[0] == "I like jazz"
    page.click("#show-all")
    page.wait_for_selector("#show-all[hidden]", state="attached")
    expect(page.locator("#rows tr")).to_have_count(2)
    assert "Bob" not in page.content()

    assert page.evaluate("sessionStorage.getItem('memray.ui.key')") == ALICE
    api_calls = [r for r in requests if "/v1/" in r.url]
    assert len(api_calls) >= 4
    for r in requests:
        assert ALICE not in r.url
    assert {r.headers.get("authorization") for r in api_calls} == {f"Bearer {ALICE}"}


def test_a_user_edits_deletes_exports_and_clears(
        page: Any, served: tuple[httpx.Client, str], tmp_path: Path) -> None:
    http, _ = served
    ids = seed(http, "alice", "I live in Shanghai", "I like jazz", XSS)
    seed(http, "bob", "Bob's secret plan")
    sign_in(page, ALICE, "alice")
    expect(page.locator("#rows tr")).to_have_count(3)

    shanghai = page.locator(f"#rows tr[data-id='{ids[0]}']")
    shanghai.get_by_role("button", name="Edit").click()
    shanghai.locator("textarea").fill("I live in Hangzhou")
    shanghai.get_by_role("button", name="Save").click()
    expect(page.locator("#status")).to_have_text("Saved.")
    assert "I live in Hangzhou" in contents(page)
    assert http.get(f"/v1/memories/{ids[0]}", params={"user_id": "alice"},
                    headers=auth(ALICE)).json()["content"] == "I live in Hangzhou"

    page.locator(f"#rows tr[data-id='{ids[0]}']").get_by_role("button", name="History").click()
    page.wait_for_selector("#history:not([hidden])")
    events = page.locator("#events li")
    assert events.locator(".op").all_text_contents() == ["ADD", "UPDATE"]
    assert events.nth(1).locator(".before").text_content() == "before: I live in Shanghai"
    shot(page, tmp_path / "history.png")

    page.locator(f"#rows tr[data-id='{ids[1]}']").get_by_role("button", name="Delete").click()
    page.click("#confirm-ok")
    expect(page.locator("#status")).to_have_text("Deleted.")
    assert "I like jazz" not in contents(page)
    assert http.get(f"/v1/memories/{ids[1]}", params={"user_id": "alice"},
                    headers=auth(ALICE)).status_code == 404

    with page.expect_download() as download:
        page.click("#export")
    assert download.value.suggested_filename == "memray-alice.json"
    exported = json.loads(Path(download.value.path()).read_text(encoding="utf-8"))
    assert sorted(d["content"] for d in exported if d["kind"] == "memory") == sorted(
        ["I live in Hangzhou", XSS])
    assert "Bob" not in json.dumps(exported)

    page.click("#clear-all")
    assert page.locator("#confirm-ok").is_disabled()  # until the user id is typed
    page.click("#confirm-cancel")
    assert len(http.get("/v1/memories", params={"user_id": "alice"},
                        headers=auth(ALICE)).json()["items"]) == 2
    page.click("#clear-all")
    page.fill("#confirm-input", "alice")
    page.click("#confirm-ok")
    expect(page.locator("#status")).to_have_text("Deleted 2 memories.")
    assert page.locator("#caption").text_content() == "No memories."
    assert http.get("/v1/memories", params={"user_id": "alice"},
                    headers=auth(ALICE)).json()["items"] == []
    assert len(http.get("/v1/memories", params={"user_id": "bob"},
                        headers=auth(ADMIN)).json()["items"]) == 1
    shot(page, tmp_path / "cleared.png")
    assert page.evaluate("window.__xss") is None


def test_a_key_of_another_user_sees_nothing(
        page: Any, served: tuple[httpx.Client, str], tmp_path: Path) -> None:
    http, _ = served
    seed(http, "alice", "I live in Shanghai")
    sign_in(page, TEAM, "alice")  # TEAM may act only for users named team-*
    page.wait_for_selector("#status.error")
    assert "may not see or change the memories of user \"alice\"" in str(
        page.locator("#status").text_content())
    assert page.locator("#rows tr").count() == 0
    assert "Shanghai" not in page.content()
    page.click("#export")
    page.wait_for_selector("#status.error")
    assert "Shanghai" not in page.content()
    shot(page, tmp_path / "forbidden.png")

    page.click("#sign-out")
    sign_in(page, "mr_not_a_key", "alice")
    expect(page.locator("#status")).to_contain_text("not accepted")
    assert page.locator("#rows tr").count() == 0


def test_the_page_is_served_with_a_strict_policy(served: tuple[httpx.Client, str]) -> None:
    http, _ = served
    r = http.get("/ui")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    script = http.get("/ui/app.js")
    assert script.headers["content-type"].startswith("text/javascript")
    assert "innerHTML" not in script.text and "insertAdjacentHTML" not in script.text
    assert http.get("/ui/app.css").status_code == 200
    assert http.get("/ui/..%2Fapp.py").status_code == 404
    assert http.get("/ui/secret.txt").json()["error"] == "not_found"
