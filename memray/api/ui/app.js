// The memray memory page: list, search, edit, delete, export and clear one user's
// memories through the REST API v1. Memory content is only ever set as text
// (textContent), never parsed as HTML. The API key lives in sessionStorage (this tab)
// and travels only in the Authorization header, never in a URL.
"use strict";

(() => {
  const KEY = "memray.ui.key";
  const USER = "memray.ui.user";
  const $ = (id) => document.getElementById(id);
  const view = { cursors: [null], next: null, query: null };

  class ApiError extends Error {
    constructor(status, body) {
      super(`HTTP ${status}`);
      this.status = status;
      this.body = body;
    }
  }

  const user = () => sessionStorage.getItem(USER) || "";
  const seg = (s) => encodeURIComponent(s);

  async function api(method, path, { params = {}, body } = {}) {
    const url = new URL(path, window.location.origin);
    for (const [k, v] of Object.entries(params)) {
      if (v !== null && v !== undefined) url.searchParams.set(k, String(v));
    }
    const headers = { Authorization: `Bearer ${sessionStorage.getItem(KEY) || ""}` };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const resp = await fetch(url, {
      method, headers, cache: "no-store", credentials: "omit",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = null;
    try { data = await resp.json(); } catch (_) { data = null; }
    if (!resp.ok) throw new ApiError(resp.status, data);
    return data;
  }

  function explain(err) {
    if (!(err instanceof ApiError)) return `Could not reach the server: ${err.message}`;
    if (err.status === 401) return "This API key was not accepted. Sign out and sign in with a valid key.";
    if (err.status === 403) {
      return `This API key may not see or change the memories of user "${user()}". ` +
        "Sign out and sign in with a key for that user.";
    }
    if (err.status === 404) return "That memory no longer exists.";
    const detail = err.body && err.body.detail;
    const text = typeof detail === "string" ? detail : detail ? JSON.stringify(detail) : "";
    return `Request failed (HTTP ${err.status})${text ? `: ${text}` : ""}`;
  }

  function say(text, isError = false) {
    const status = $("status");
    status.textContent = text;
    status.className = isError ? "error" : "";
  }

  async function attempt(run) {
    try {
      await run();
    } catch (err) {
      say(explain(err), true);
      return false;
    }
    return true;
  }

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  function button(label, onClick, className) {
    const b = el("button", label, className);
    b.type = "button";
    b.addEventListener("click", onClick);
    return b;
  }

  const when = (iso) => (iso ? new Date(iso).toISOString().slice(0, 16).replace("T", " ") : "");

  function row(record) {
    const tr = el("tr");
    tr.dataset.id = record.id;
    const content = el("td", record.content, "content");
    tr.append(content, el("td", record.type, "type"), el("td", record.status, "state"),
      el("td", when(record.created_at), "created"), el("td", when(record.updated_at), "updated"));
    const actions = el("td", null, "actions");
    actions.append(button("Edit", () => edit(content, record)),
      button("History", () => history(record)),
      button("Delete", () => remove(record), "danger"));
    tr.append(actions);
    return tr;
  }

  function show(records, caption) {
    $("rows").replaceChildren(...records.map(row));
    $("caption").textContent = caption;
  }

  // Only the latest load renders: an older answer arriving late is dropped.
  let loads = 0;

  async function load() {
    const ticket = ++loads;
    $("history").hidden = true;
    const ok = await attempt(async () => {
      if (view.query !== null) {
        const query = view.query;
        const found = await api("POST", "/v1/memories/search",
          { body: { user_id: user(), query } });
        if (ticket !== loads) return;
        show(found.results.map((h) => h.memory),
          `${found.results.length} result(s) for "${query}"`);
        view.next = null;
      } else {
        const size = Math.max(1, Math.min(1000, Number($("page-size").value) || 25));
        const cursor = view.cursors[view.cursors.length - 1];
        const page = await api("GET", "/v1/memories",
          { params: { user_id: user(), limit: size, cursor } });
        if (ticket !== loads) return;
        show(page.items, page.items.length ? "" : "No memories.");
        view.next = page.next_cursor;
      }
      say("");
    });
    if (ticket !== loads) return false;
    if (!ok) { show([], ""); view.next = null; }
    $("prev").disabled = view.query !== null || view.cursors.length < 2;
    $("next").disabled = !view.next;
    $("page-no").textContent = view.query === null ? `Page ${view.cursors.length}` : "";
    $("show-all").hidden = view.query === null;
    return ok;
  }

  function edit(cell, record) {
    const box = el("textarea");
    box.value = record.content;
    const save = button("Save", () => attempt(async () => {
      await api("PUT", `/v1/memories/${seg(record.id)}`,
        { params: { user_id: user() }, body: { content: box.value } });
      if (await load()) say("Saved.");
    }));
    cell.replaceChildren(box, save, button("Cancel", () => { cell.textContent = record.content; }));
    box.focus();
  }

  async function remove(record) {
    if (!await confirmed(`Delete this memory? "${record.content}"`, "Delete")) return;
    await attempt(async () => {
      await api("DELETE", `/v1/memories/${seg(record.id)}`, { params: { user_id: user() } });
      if (await load()) say("Deleted.");
    });
  }

  function event(e) {
    const li = el("li");
    li.append(el("span", e.op, "op"), el("span", ` ${when(e.at)}`));
    if (e.previous) li.append(el("div", `before: ${e.previous.content}`, "before"));
    if (e.memory) li.append(el("div", `after: ${e.memory.content}`, "after"));
    if (e.reason) li.append(el("div", `reason: ${e.reason}`, "reason"));
    return li;
  }

  async function history(record) {
    await attempt(async () => {
      const events = await api("GET", `/v1/memories/${seg(record.id)}/history`,
        { params: { user_id: user() } });
      $("history-of").textContent = record.content;
      $("events").replaceChildren(...events.map(event));
      $("history").hidden = false;
    });
  }

  async function exportAll() {
    await attempt(async () => {
      const data = await api("GET", `/v1/users/${seg(user())}/export`);
      const blob = new Blob([JSON.stringify(data, null, 2)], { type: "application/json" });
      const link = el("a");
      link.href = URL.createObjectURL(blob);
      link.download = `memray-${user().replace(/[^A-Za-z0-9._-]/g, "_")}.json`;
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(link.href), 10000);
      say(`Exported ${data.filter((d) => d.kind === "memory").length} memories.`);
    });
  }

  async function clearAll() {
    const text = `Delete every memory of user "${user()}" and its history? This cannot be undone.`;
    if (!await confirmed(text, "Delete all", user())) return;
    await attempt(async () => {
      const done = await api("DELETE", `/v1/users/${seg(user())}/memories`);
      view.cursors = [null];
      view.query = null;
      if (await load()) say(`Deleted ${done.deleted} memories.`);
    });
  }

  // A modal confirmation; with `word`, the button stays disabled until it is typed.
  function confirmed(text, okLabel, word) {
    const dialog = $("confirm");
    const ok = $("confirm-ok");
    const input = $("confirm-input");
    $("confirm-text").textContent = text;
    ok.textContent = okLabel;
    input.value = "";
    $("confirm-type").hidden = !word;
    $("confirm-word").textContent = word || "";
    ok.disabled = Boolean(word);
    input.oninput = () => { ok.disabled = Boolean(word) && input.value !== word; };
    return new Promise((resolve) => {
      dialog.returnValue = "";
      dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
      dialog.showModal();
    });
  }

  function signedIn() {
    const on = Boolean(sessionStorage.getItem(KEY) && user());
    $("sign-in").hidden = on;
    $("main").hidden = !on;
    $("sign-out").hidden = !on;
    $("who").textContent = on ? `Memories of user "${user()}"` : "";
    if (on) {
      view.cursors = [null];
      view.query = null;
      load();
    }
  }

  function wire() {
    $("sign-in-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      sessionStorage.setItem(KEY, $("key").value.trim());
      sessionStorage.setItem(USER, $("user").value.trim());
      $("key").value = "";
      say("");
      signedIn();
    });
    $("sign-out").addEventListener("click", () => {
      sessionStorage.removeItem(KEY);
      sessionStorage.removeItem(USER);
      show([], "");
      say("Signed out.");
      signedIn();
    });
    $("search-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const q = $("query").value.trim();
      view.query = q ? q : null;
      view.cursors = [null];
      load();
    });
    $("show-all").addEventListener("click", () => {
      $("query").value = "";
      view.query = null;
      view.cursors = [null];
      load();
    });
    $("page-size").addEventListener("change", () => { view.cursors = [null]; load(); });
    $("next").addEventListener("click", () => {
      if (view.next) { view.cursors.push(view.next); load(); }
    });
    $("prev").addEventListener("click", () => {
      if (view.cursors.length > 1) { view.cursors.pop(); load(); }
    });
    $("export").addEventListener("click", exportAll);
    $("clear-all").addEventListener("click", clearAll);
    $("close-history").addEventListener("click", () => { $("history").hidden = true; });
    signedIn();
  }

  wire();
})();
