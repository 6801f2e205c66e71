"""The REST API against its own OpenAPI document, fuzzed by schemathesis over real HTTP
on 127.0.0.1 (uvicorn in a thread, `test_api_http.Served`), on the embedded default.

Every generated request (positive and negative data, every operation in the schema,
schemathesis' examples, coverage and fuzzing phases) runs every built-in check (`--checks
all`: no 5xx, status codes, content types, headers and bodies as declared, schema-valid
data accepted, schema-invalid data rejected, 405 with `Allow`, ...) plus two of ours:
- every 4xx is the `{error, detail}` body;
- scopes: the request's key is one of a user key (alice), a prefix key (team-), a bad
  key or none; a request whose user the key does not allow gets no 2xx, and no response
  ever carries the memories of the victim user that no key here may act for; after the
  run the victim's memories, history and version are exactly as seeded.
Valid user and memory ids in generated requests are swapped, part of the time, for
the seeded users' (hostile ones among them) and the victim's (on the mem0 routes, in
their `<user_id>:<uuid>` form too), so scopes are exercised with ids that exist.
mem0's compatibility routes (memray/api/mem0_routes.py) are held to their schema like
every other route.

CI: MAX_EXAMPLES per operation (bounded); MEMRAY_FUZZ_EXAMPLES=N for a long run.
The count of requests sent is printed at the end.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
import schemathesis.engine
from schemathesis import Case, CheckContext, Response
from schemathesis.engine.events import FatalError, NonFatalError, ScenarioFinished
from test_api_http import ALICE, TEAM, Served

from memray import Memory, MemoryConfig
from memray.api.auth import ApiKey, KeyRing, hash_key, presented_key
from memray.embed.cache import CachedEmbedder

MAX_EXAMPLES = int(os.environ.get("MEMRAY_FUZZ_EXAMPLES", "0")) or 40
VICTIM = "bob"
VICTIM_TEXTS = ["bob-secret: I am allergic to shellfish", "bob-secret: 我住在成都"]
HOSTILE = 'team-" or user_id != "\n%*\\'
OWN_USERS = ["alice", "team-1", HOSTILE, "team-\u0430"]  # Cyrillic a
BAD_KEY = "mr_not_a_key"
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_ID = re.compile(f"^{_UUID}$")
_MEM0_ID = re.compile(f"^.+:{_UUID}$", re.S)  # the mem0 routes' `<user_id>:<memray id>`


class World:
    """The served app and what was seeded: ids of the victim's and of in-scope users."""

    def __init__(self, memory: Memory, base_url: str) -> None:
        self.memory, self.base_url = memory, base_url
        self.victim_ids = [e.memory_id for e in memory.add(
            [{"role": "user", "content": t} for t in VICTIM_TEXTS], user_id=VICTIM,
            infer=False).events]
        self.victim_state = self.snapshot()
        self.own_ids = [memory.add(f"I like tea number {i}", user_id=u, infer=False)
                        .events[0].memory_id for i, u in enumerate(OWN_USERS)]

    def snapshot(self) -> Any:
        items = self.memory.get_all(user_id=VICTIM).items
        return ([r.model_dump(mode="json") for r in items],
                [[e.model_dump(mode="json") for e in self.memory.history(i, user_id=VICTIM)]
                 for i in self.victim_ids],
                self.memory.version(user_id=VICTIM))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory,
          embedder: CachedEmbedder) -> Iterator[World]:
    data = tmp_path_factory.mktemp("schemathesis")
    with Memory(MemoryConfig(data_dir=str(Path(data) / "d")), embedder=embedder) as memory:
        served = Served(memory)
        with served as client:
            world = World(memory, str(client.base_url))
            yield world
        assert world.snapshot() == world.victim_state, "the victim's memories changed"


def _config() -> schemathesis.Config:
    # A request the schema allows fits the server's default limits (ids are at most
    # MAX_REST_ID_CHARS, bodies far under max_body_bytes): a 413 or 414 for one is a
    # failure. Invalid data may be answered by the guard first.
    return schemathesis.Config.from_dict({
        # Generation time depends on the load of shared CI cores, not on the API.
        "suppress-health-check": ["too_slow", "large_base_example"],
        "generation": {"max-examples": MAX_EXAMPLES, "mode": "all", "database": "none",
                       "deterministic": not os.environ.get("MEMRAY_FUZZ_EXAMPLES")},
        "phases": {"stateful": {"enabled": False}},
        "checks": {
            "positive_data_acceptance": {"expected-statuses": [
                "2xx", "401", "403", "404", "409"]},
            "negative_data_rejection": {"expected-statuses": [
                "400", "401", "403", "404", "405", "409", "413", "414", "422"]},
        },
    })


@pytest.fixture(scope="module")
def api_schema(world: World) -> schemathesis.BaseSchema:
    PICKS[:] = ([*OWN_USERS, VICTIM], [*world.own_ids, *world.victim_ids],
                [*(f"{u}:{i}" for u, i in zip(OWN_USERS, world.own_ids, strict=True)),
                 *(f"{VICTIM}:{i}" for i in world.victim_ids)])
    return schemathesis.openapi.from_url(f"{world.base_url}/openapi.json", config=_config())


# Keys a request presents, in turn: the user key and the prefix key in each accepted
# form, an unknown key, none.
PRESENTED = [("authorization", f"Bearer {ALICE}"), ("authorization", f"Token {TEAM}"),
             ("x-api-key", ALICE), ("authorization", f"Bearer {TEAM}"),
             ("authorization", f"Bearer {BAD_KEY}"), None]
PICKS: list[list[str]] = []
_pick = random.Random(13)


@schemathesis.hook
def before_call(ctx: Any, case: Case, kwargs: dict[str, Any]) -> None:
    """A key from PRESENTED; a valid user or memory id swapped, half the time, for one
    that exists (schemathesis re-checks the case after this hook, so a negative case
    stays classed right)."""
    headers = {k: v for k, v in (case.headers or {}).items()
               if k.lower() not in ("authorization", "x-api-key")}
    presented = _pick.choice(PRESENTED)
    if presented is not None:
        headers[presented[0]] = presented[1]
    case.headers = headers
    users, ids, mem0_ids = PICKS
    for part in (case.path_parameters, case.query, case.body):
        if not isinstance(part, dict):
            continue
        user = part.get("user_id")
        if isinstance(user, str) and user.strip() and "\x00" not in user and _pick.random() < .5:
            part["user_id"] = _pick.choice(users)
        mid = part.get("memory_id")
        if isinstance(mid, str) and _ID.match(mid) and _pick.random() < .5:
            part["memory_id"] = _pick.choice(ids)
        elif isinstance(mid, str) and _MEM0_ID.match(mid) and _pick.random() < .5:
            part["memory_id"] = _pick.choice(mem0_ids)


def _key(case: Case) -> ApiKey | None:
    headers = {k.lower(): v for k, v in (case.headers or {}).items()}
    presented = presented_key(headers.get("authorization"), headers.get("x-api-key"))
    ring = KeyRing(keys=[ApiKey(name="alice", sha256=hash_key(ALICE), users=["alice"]),
                         ApiKey(name="team", sha256=hash_key(TEAM), user_prefix="team-")])
    return next((k for k in ring.keys if presented and k.sha256 == hash_key(presented)), None)


def _users_named(case: Case) -> set[str]:
    """Every user id the request names (path, query, body, mem0 filters and ids)."""
    named: set[str] = set()
    for part in (case.path_parameters, case.query, case.body):
        if isinstance(part, dict):
            for k, v in part.items():
                if k == "user_id" and isinstance(v, str):
                    named.add(v)
                if k == "filters" and isinstance(v, dict) and isinstance(v.get("user_id"), str):
                    named.add(v["user_id"])
                if k == "memory_id" and isinstance(v, str) and ":" in v:
                    named.add(v.rsplit(":", 1)[0])
    return named


@schemathesis.check
def error_bodies_and_scopes(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """4xx: `{error, detail}`. 2xx: only for a key that allows every user the request
    names, and never with the victim's memories."""
    if 400 <= response.status_code < 500:
        try:
            body = json.loads(response.text)
        except ValueError:
            body = None
        assert isinstance(body, dict) and set(body) == {"error", "detail"}, (
            f"{response.status_code} without the {{error, detail}} body: {response.text[:200]}")
        assert isinstance(body["error"], str) and body["error"]
    named = _users_named(case)
    if VICTIM in named:
        SCOPES[f"victim named: {response.status_code}"] += 1
    if 200 <= response.status_code < 300 and named:
        SCOPES["in scope: 2xx"] += 1
    if 200 <= response.status_code < 300 and case.operation.path not in ("/healthz",
                                                                         "/metrics"):
        key = _key(case)
        assert key is not None, "a request without a valid key got a 2xx"
        assert all(key.allows(u) for u in _users_named(case)), (key.name, _users_named(case))
        for secret in (*VICTIM_TEXTS, *VICTIM_IDS):
            assert secret not in response.text, f"{key.name} got {VICTIM}'s {secret}"
    return None


VICTIM_IDS: list[str] = []
SCOPES: Counter[str] = Counter()


def run_schemathesis(schema: schemathesis.BaseSchema) -> tuple[Counter[str], list[str]]:
    """The CLI's run in process: (requests by status, failures)."""
    statuses: Counter[str] = Counter()
    problems: list[str] = []
    for event in schemathesis.engine.from_schema(schema).execute():
        if isinstance(event, ScenarioFinished):
            for interaction in event.recorder.interactions.values():
                code = interaction.response.status_code if interaction.response else 0
                statuses[str(code)] += 1
            for case_id, checks in event.recorder.checks.items():
                for c in checks:
                    if c.failure_info is not None:
                        problems.append(_report(event.recorder, case_id, c))
        elif isinstance(event, NonFatalError | FatalError):
            problems.append(f"error in {getattr(event, 'label', '?')}: "
                            f"{getattr(event, 'value', None) or event}")
    return statuses, sorted(set(problems))


def _report(recorder: Any, case_id: str, check: Any) -> str:
    info = check.failure_info
    interaction = recorder.interactions.get(case_id)
    response = interaction.response if interaction else None
    answer = f"{response.status_code} {(response.content or b'')[:200]!r}" if response else "?"
    return (f"{check.name}: {info.failure.title}: {info.failure.message[:300]}\n"
            f"  {info.code_sample[:400]}\n  -> {answer}")


def test_api_conforms_to_its_openapi(api_schema: schemathesis.BaseSchema,
                                     world: World) -> None:
    VICTIM_IDS[:] = world.victim_ids
    statuses, problems = run_schemathesis(api_schema)
    total = sum(statuses.values())
    print(f"\nschemathesis: {total} requests, by status {dict(sorted(statuses.items()))}")
    print(f"scopes: {dict(sorted(SCOPES.items()))}")
    assert not problems, f"{len(problems)} failures:\n" + "\n".join(problems[:40])
    # Both scopes were exercised: requests for the victim (refused) and 2xx for own users.
    assert SCOPES["victim named: 403"] > 10 and SCOPES["in scope: 2xx"] > 10
    assert statuses["500"] == 0 and total > 500
