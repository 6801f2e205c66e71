"""memray: long-term memory for AI agents.

`memray demo` runs two sessions of one user on the embedded default; `memray api` and
`memray serve` serve the REST API (and MCP at /mcp); `memray mcp` serves MCP on stdio;
`memray jobs NAME` runs a Ray Data batch job; `memray doctor` checks a store against its
log; `memray bench NAME` measures; `memray keys new` makes an API key.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from memray import __version__
from memray.config import MemoryConfig
from memray.core.memory import Memory
from memray.core.policies import pii_kinds
from memray.serve_config import default_serve_config

SESSION_1 = [
    [{"role": "user", "content": "Hi! My name is Lin. I live in Shanghai."},
     {"role": "assistant", "content": "Nice to meet you, Lin. How can I help?"}],
    [{"role": "user", "content": "I'm allergic to peanuts. I'm only free after 9 pm, "
                                 "and I like writing scripts in Python."},
     {"role": "assistant", "content": "Got it: no peanuts, evenings after 9."}],
    [{"role": "user", "content": "By the way, how's the weather today?"},
     {"role": "assistant", "content": "Sunny."}],
    [{"role": "user", "content": "I moved to Hangzhou last month, my email is lin@example.com"},
     {"role": "assistant", "content": "Noted."}],
    [{"role": "user", "content": "我不吃香菜"}, {"role": "assistant", "content": "好的。"}],
    [{"role": "user", "content": "别放香菜"}, {"role": "assistant", "content": "记住了。"}],
]
SESSION_2_QUERIES = [
    "Can you suggest a snack with peanut butter?",
    "When would suit a deep-work discussion?",
    "Which city do I live in?",
    "晚饭做什么菜？",
]


def demo(data_dir: str, user_id: str) -> int:
    """Two sessions of one user: what session 1 stores, what session 2 recalls."""
    cfg = MemoryConfig(data_dir=data_dir)
    print(f"memray {__version__} demo: embedded milvus-lite + all-MiniLM-L6-v2 in {data_dir}/")
    t0 = time.perf_counter()
    with Memory(cfg) as m:
        removed = m.delete_all(user_id=user_id).deleted
        if removed:
            print(f"(reset: removed {removed} memories left by an earlier demo run)")
        print(f"\n== session 1 (opened in {time.perf_counter() - t0:.1f}s): "
              "each round is extracted and resolved ==")
        for round_ in SESSION_1:
            print(f"\n  user: {round_[0]['content']}")
            result = m.add(round_, user_id=user_id, session_id="session-1")
            for e in result.events:
                rec = e.memory or e.previous
                assert rec is not None
                status = f" [{rec.status.value}]" if rec.status.value != "active" else ""
                print(f"    {e.op:<6} {rec.type.value:<10} {rec.content}{status}")
            if not result.events:
                print("    (nothing worth keeping)")
            kinds = pii_kinds(round_[0]["content"])
            if kinds:
                print(f"    (personal data not kept: {', '.join(kinds)})")
    print("\n== session 2: a new Memory instance on the same data dir (a restart) ==")
    with Memory(cfg) as m:
        for query in SESSION_2_QUERIES:
            t = time.perf_counter()
            hits = m.search(query, user_id=user_id, top_k=2)
            ms = (time.perf_counter() - t) * 1000
            print(f"\n  query: {query}   ({ms:.1f} ms)")
            for h in hits:
                print(f"    {h.similarity:.2f}  {h.memory.content}")
        print("\n  prompt section for the first query:\n")
        section = m.context(SESSION_2_QUERIES[0], user_id=user_id)
        print("\n".join("    " + line for line in section.splitlines()))
        print(f"\n  memories held for {user_id}: {len(m.get_all(user_id=user_id).items)}, "
              f"memory version {m.version(user_id=user_id)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["jobs"] and len(args_in) > 1 and not args_in[1].startswith("-"):
        from memray.batch.cli import main as jobs_main

        return jobs_main(args_in[1], args_in[2:])
    return _dispatch(_parser(), args_in)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memray", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the version")
    sv = sub.add_parser("serve", help="run the Ray Serve app (`serve run CONFIG`)")
    sv.add_argument("--config", default=None, help="a Ray Serve config YAML (default: "
                    "serve_configs/local.yaml if it exists here, else the copy shipped in "
                    "the package: CPU, milvus-lite under ./memray_data/serve, port 8000)")
    _api_parser(sub)
    _mcp_parser(sub)
    _doctor_parser(sub)
    keys = sub.add_parser("keys", help="API keys").add_subparsers(dest="keys", required=True)
    kn = keys.add_parser("new", help="print a new key and its keys-file entry")
    kn.add_argument("--name", required=True, help="a label for the key (logs, audit)")
    kn.add_argument("--user", action="append", default=[], help="an exact user id the key "
                    "may act for (repeat)")
    kn.add_argument("--user-prefix", default=None, help="the key may act for every user id "
                    "with this prefix")
    kn.add_argument("--admin", action="store_true", help="the key may act for every user")
    keys.add_parser("master", help="print a new master key for security.encryption (base64 "
                    "of 32 random bytes: put it in a file, a secret or MEMRAY_MASTER_KEY)")
    sub.add_parser("jobs", help="batch jobs on Ray Data: `memray jobs backfill|maintenance|"
                   "migrate --help`", description="Batch jobs on Ray Data:\n"
                   "  backfill     import conversation logs (JSONL/Parquet) as memories\n"
                   "  maintenance  nightly: expire, retire, decay, merge; refresh profiles\n"
                   "  migrate      re-embed into a new model's collection, then switch\n"
                   "Run `memray jobs NAME --help` for a job's options.",
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    _bench_parser(sub)
    return parser


def _bench_recall_parser(bench: Any) -> None:
    r = bench.add_parser("recall", help="in-process recall latency (lite or a server)")
    r.add_argument("--users", type=int, default=1)
    r.add_argument("--per-user", type=int, default=10_000)
    r.add_argument("--queries", type=int, default=200)
    r.add_argument("--milvus-uri", default=None, help="a Milvus server; default: milvus-lite")
    r.add_argument("--data-dir", default=None, help="reuse a corpus; default: a temp dir")
    r.add_argument("--hot-set", choices=["auto", "on", "off"], default="auto")
    r.add_argument("--postgres-dsn", default=None, help="the shared PostgreSQL event log "
                   "(store.postgres_dsn): with --milvus-uri, hot set `auto` turns on")
    r.add_argument("--query-users", type=int, default=None, help="queries cycle over the "
                   "first N users (default: all users, each query a different user)")
    r.add_argument("--runtime", choices=["auto", "onnx", "torch"], default="auto",
                   help="embedder.runtime (default auto: ONNX Runtime on CPU)")
    r.add_argument("--questions", default=None, help="a LoCoMo JSON file whose questions "
                   "are the queries (names, topics, dates); default: one synthetic question")
    r.add_argument("--write-every", type=int, default=0, help="a verbatim add to the "
                   "queried user before every Nth timed query; the searches right after a "
                   "write are reported apart (search_after_write_ms); N >= 2. The adds "
                   "stay in a reused --data-dir corpus")


def _bench_parser(sub: Any) -> None:
    bench = sub.add_parser("bench", help="benchmarks").add_subparsers(dest="bench",
                                                                       required=True)
    _bench_recall_parser(bench)
    lo = bench.add_parser("locomo", help="LoCoMo retrieval recall (recall@k, all@k, MRR)")
    lo.add_argument("--data", required=True, help="a LoCoMo JSON file")
    lo.add_argument("--mode", choices=["turns", "observations"], default="turns")
    lo.add_argument("--json", action="store_true", help="print JSON instead of a table")
    lo.add_argument("--no-times", action="store_true", help="ablation: add turns without "
                    "their session's time (default: each session's date is the timestamp)")
    lo.add_argument("--reply-chars", type=int, default=None, help="write.reply_context_chars "
                    "(characters of the answered turn kept with each turn); default: config")
    lo.add_argument("--w-lexical", type=float, default=None,
                    help="recall.w_lexical (keyword weight); default: the config default")
    lo.add_argument("--embedder", default=None, metavar="MODEL", help="embedder.model, e.g. "
                    "use-multilingual-v3 or all-MiniLM-L6-v2*0.5+use-multilingual-v3*0.5 "
                    "(default: the config default)")
    lo.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="a config override, e.g. recall.w_when=0.2 or recall.hot_set=off "
                    "(a JSON value, else the word; repeatable)")
    lo.add_argument("--cv", action="store_true", help="4-fold cross-validation over the "
                    "conversations: tune a small grid on the others, report each held out")
    lo.add_argument("--grid", default=None, metavar="JSON", help="for --cv, the knobs and "
                    "values to try, e.g. '{\"recall.w_episode\": [0, 0.3]}' (default: "
                    "reply context, keyword weight, session spread)")
    lo.add_argument("--every", type=int, default=1, metavar="N", help="only every Nth "
                    "question of each conversation (for slow variants such as --rerank-llm)")
    lo.add_argument("--rerank-llm", default=None, metavar="MODEL", help="reorder the top "
                    "--rerank-k turns with a packaged instruct model (memray/bench/rerank.py), "
                    "e.g. qwen2.5-coder-1.5b-instruct-q4_k_m")
    lo.add_argument("--rerank-k", type=int, default=20)
    lo.add_argument("--relevance", action="store_true", help="search as an agent does, with "
                    "the relevance decision (default: threshold -1, ranking only), so "
                    "recall@k counts only what search keeps")
    ig = bench.add_parser("ingest", help="backfill --infer false throughput vs the raw "
                          "embedder on the same texts")
    ig.add_argument("--users", type=int, default=200)
    ig.add_argument("--turns", type=int, default=40, help="user turns per user")
    ig.add_argument("--num-cpus", type=int, default=None)
    ig.add_argument("--runtime", choices=["auto", "onnx", "torch"], default="auto",
                    help="embedder.runtime of both the raw embedder and the job")
    ig.add_argument("--actors", type=int, default=1, help="embedding actors; each gets "
                    "an equal share of the CPUs and one intra-op thread per CPU")
    mg = bench.add_parser("migrate", help="re-embed throughput and failed reads during a "
                          "migration to all-mpnet-base-v2")
    mg.add_argument("--users", type=int, default=50)
    mg.add_argument("--per-user", type=int, default=40)
    mg.add_argument("--num-cpus", type=int, default=None)
    mg.add_argument("--reads-per-s", type=float, default=5.0)
    m0 = bench.add_parser("mem0", help="memray vs mem0 OSS: add(infer=False) and search "
                          "(needs the bench extra)")
    m0.add_argument("--users", type=int, default=20)
    m0.add_argument("--per-user", type=int, default=50)
    m0.add_argument("--queries", type=int, default=200)
    en = bench.add_parser("encryption", help="crypto-shredding's cost: verbatim adds and "
                          "searches, plain vs encrypted, and the cipher alone")
    en.add_argument("--users", type=int, default=10)
    en.add_argument("--per-user", type=int, default=50)
    en.add_argument("--queries", type=int, default=200)
    en.add_argument("--rounds", type=int, default=4, help="plain/encrypted pairs, who goes "
                    "first alternating (default 4); medians are reported")
    _bench_serve_parser(bench)
    _bench_embed_parser(bench)
    _bench_capacity_parser(bench)
    so = bench.add_parser("soak", help="mixed traffic against `memray api` (or `memray "
                          "serve`) on 127.0.0.1, then the store checked against what was "
                          "acknowledged (lost, resurrected), errors by kind and RSS growth")
    so.add_argument("--minutes", type=float, default=15.0, help="default 15")
    so.add_argument("--target", choices=["api", "serve"], default="api",
                    help="api: one `memray api` process (default); serve: the Ray Serve app "
                    "of the local config")
    so.add_argument("--clients", type=int, default=8, help="closed-loop clients (default 8)")
    so.add_argument("--users", type=int, default=20, help="default 20")


def _bench_capacity_parser(bench: Any) -> None:
    c = bench.add_parser("capacity", help="hot-set hit rate and memory per API replica on a "
                         "simulated Zipf trace, affine vs round robin, beside the model of "
                         "docs/capacity.md (in process, no servers)")
    c.add_argument("--users", type=int, default=100_000)
    c.add_argument("--requests", type=int, default=100_000, help="trace length (default "
                   "100,000; the first quarter warms the hot sets and is not counted)")
    c.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent over users")
    c.add_argument("--replicas", type=int, default=3)
    c.add_argument("--capacities", default="256,1024,4096",
                   help="recall.hot_set_users values to try, comma-separated")
    c.add_argument("--model-only", action="store_true", help="print the model's hit rates "
                   "for these users, replicas and capacities without simulating (for "
                   "populations too large to replay, e.g. --users 10000000)")
    c.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _bench_embed_parser(bench: Any) -> None:
    b = bench.add_parser("embed", help="embedding runtimes side by side (torch, ONNX Runtime "
                         "float and int8): query latency, throughput, LoCoMo recall")
    b.add_argument("--model", default="all-MiniLM-L6-v2")
    b.add_argument("--runtimes", default="torch,onnx,onnx-int8",
                   help="comma-separated: torch, onnx, onnx-int8 (torch first: the reference)")
    b.add_argument("--threads", type=int, default=None,
                   help="intra-op threads for every runtime (default: the CPU count)")
    b.add_argument("--queries", type=int, default=200, help="single queries timed")
    b.add_argument("--texts", type=int, default=512, help="texts per batch size")
    b.add_argument("--rounds", type=int, default=5, help="the runtimes take turns this often")
    b.add_argument("--no-recall", action="store_true", help="skip the LoCoMo recall run")
    b.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _bench_serve_parser(bench: Any) -> None:
    b = bench.add_parser("serve", help="bounded HTTP load on 127.0.0.1 against the Serve app, "
                         "or (--milvus-uri + --postgres-dsn) against `memray api` replicas")
    b.add_argument("--clients", type=int, default=20)
    b.add_argument("--seconds", type=float, default=None, help="per load; default 30 "
                   "(Serve: search with --clients, search with 1, mixed), 20 (replicas)")
    b.add_argument("--add-share", type=float, default=0.1,
                   help="the share of adds in the mixed load (default 0.1)")
    b.add_argument("--warmup", type=float, default=3.0, help="seconds of the same load, "
                   "not recorded, before each measured one (default 3; longer lets "
                   "caches such as the hot set reach their steady state)")
    b.add_argument("--users", type=int, default=50)
    b.add_argument("--url", default=None, help="a running app on 127.0.0.1; default: start one")
    b.add_argument("--key", default="mr_local_dev_key")
    b.add_argument("--config", default=None, help="the Serve config to start (default: "
                   "serve_configs/local.yaml if it exists here, else the packaged copy)")
    b.add_argument("--ingress", choices=["auto", "haproxy", "python"], default="auto",
                   help="the started app's HTTP ingress: auto (what `memray serve` picks: "
                   "HAProxy where it can start), haproxy, or python (Ray's proxy)")
    b.add_argument("--milvus-uri", default=None, help="cluster mode: a Milvus server shared "
                   "by the `memray api` replicas (with --postgres-dsn)")
    b.add_argument("--postgres-dsn", default=None, help="cluster mode: the shared PostgreSQL "
                   "event log (with --milvus-uri)")
    b.add_argument("--replicas", default=None, help="cluster mode: replica counts to measure, "
                   "e.g. 1,2,3 (default 1,2,3); the embedded single replica runs as well")
    b.add_argument("--spread", choices=["round-robin", "random", "affine"],
                   default="round-robin", help="cluster mode: how requests are spread over "
                   "the replicas (affine: each user's to the replica its id hashes to)")
    b.add_argument("--zipf", type=float, default=0.0, help="cluster mode: users drawn by "
                   "Zipf with this exponent (e.g. 1.1), 0: uniform (default)")
    b.add_argument("--no-baseline", action="store_true",
                   help="cluster mode: skip the embedded single-replica baseline")


def _api_parser(sub: Any) -> None:
    d = sub.add_parser("demo", help="two sessions of one user on the embedded default")
    d.add_argument("--data-dir", default="memray_data/demo", help="where the demo keeps its "
                   "store (default memray_data/demo; the demo resets its user there)")
    d.add_argument("--user-id", default="demo-user", help="default demo-user")
    ap = sub.add_parser("api", help="one REST API replica under plain uvicorn (no Ray); "
                        "replicas share state through MEMRAY_MILVUS_URI + MEMRAY_POSTGRES_DSN")
    ap.add_argument("--keys", required=True, help="keys file (see `memray keys new`)")
    ap.add_argument("--config", default=None, help="a MemoryConfig YAML; default: defaults")
    ap.add_argument("--data-dir", default=None, help="overrides the config's data_dir")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--job-lease-s", type=float, default=120.0,
                    help="seconds before another replica takes over an async add whose "
                    "replica died (default 120)")


def _dispatch(parser: argparse.ArgumentParser, argv: list[str]) -> int:
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.command == "version":
        print(__version__)
        return 0
    benches = {"locomo": bench_locomo, "serve": bench_serve, "embed": bench_embed,
               "soak": bench_soak, "encryption": bench_encryption,
               "capacity": bench_capacity}
    if args.command == "bench" and args.bench in benches:
        return benches[args.bench](args)
    if args.command == "bench" and args.bench in ("ingest", "migrate"):
        from memray.bench import jobs as jobs_bench

        run_bench = jobs_bench.ingest if args.bench == "ingest" else jobs_bench.migrate
        print(json.dumps(run_bench(args), indent=2))
        return 0
    if args.command == "bench" and args.bench == "mem0":
        from memray.bench.mem0 import Mem0BenchArgs
        from memray.bench.mem0 import run as run_mem0

        print(json.dumps(run_mem0(Mem0BenchArgs(users=args.users, per_user=args.per_user,
                                               queries=args.queries)), indent=2))
        return 0
    if args.command == "jobs":
        parser.error("name a job: memray jobs backfill|maintenance|migrate [--help]")
    if args.command == "bench":
        return bench_recall(args)
    if args.command == "serve":
        return serve(args.config or default_serve_config())
    if args.command == "keys":
        return new_key(args)
    if args.command == "api":
        return api(args)
    if args.command == "mcp":
        return mcp(args)
    if args.command == "doctor":
        return doctor(args)
    return demo(args.data_dir, args.user_id)


def serve(config: str) -> int:
    """Ray's `serve run CONFIG` as a child, stopped cleanly on SIGTERM, SIGINT or SIGHUP.
    A single-machine run needs no Ray token auth, so it is off unless set otherwise."""
    if not Path(config).is_file():
        print(f"memray serve: no serve config at {config}", file=sys.stderr)
        return 2
    exe = Path(sys.executable).with_name("serve")
    if not exe.exists():
        print("memray serve: Ray Serve is not installed (pip install 'memray-ai[serve]')",
              file=sys.stderr)
        return 2
    from memray.serve_ingress import ingress_env

    ingress, line = ingress_env(os.environ)
    env = {**os.environ, "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled"), **ingress}
    http = (yaml.safe_load(Path(config).read_text(encoding="utf-8")) or {}).get(
        "http_options") or {}
    print(f"memray serve: starting {config}; the API answers on http://"
          f"{http.get('host', '127.0.0.1')}:{http.get('port', 8000)} (docs at /docs, the "
          "memory page at /ui) once Ray prints \"Deployed app ... successfully\"",
          file=sys.stderr, flush=True)
    print(line, file=sys.stderr, flush=True)
    return _supervise([str(exe), "run", config], env)


def _supervise(argv: list[str], env: dict[str, str]) -> int:
    """Run `serve run` in its own process group and turn our stop signals into the SIGINT
    it shuts Serve down on (on SIGTERM, Ray's handler dumps native stacks and exits
    without that). A second stop signal, or 60 s without exiting, kills its group."""
    import signal
    import subprocess

    asked: list[float] = []
    children: list[subprocess.Popen[bytes]] = []

    def stop(signum: int, frame: object) -> None:
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                if asked:
                    os.killpg(child.pid, signal.SIGKILL)
                else:
                    child.send_signal(signal.SIGINT)
        asked.append(time.monotonic())

    # Handlers first: the child then starts with SIGINT at its default, even where ours
    # was ignored (a shell's background job), so its Python turns SIGINT into a shutdown.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    child = subprocess.Popen(argv, env=env, start_new_session=True)
    children.append(child)
    if asked:  # a stop signal came while it was starting
        child.send_signal(signal.SIGINT)
    while True:
        try:
            return child.wait(timeout=1)
        except subprocess.TimeoutExpired:
            if asked and time.monotonic() - asked[0] > 60:
                stop(signal.SIGTERM, None)


def _mcp_parser(sub: Any) -> None:
    mc = sub.add_parser("mcp", help="an MCP server on stdio (tools add_memory, "
                        "search_memories, ...) for Claude Desktop, IDEs and agent frameworks")
    mc.add_argument("--config", default=None, help="a MemoryConfig YAML; default: defaults")
    mc.add_argument("--data-dir", default=None, help="overrides the config's data_dir")


def mcp(args: argparse.Namespace) -> int:
    """Serve the MCP tools on stdin/stdout until the client closes them. The local
    operator may act for any user; stdout carries only the protocol."""
    from memray.mcp import build_server

    config = MemoryConfig.load(args.config) if args.config else MemoryConfig()
    if args.data_dir:
        config = config.model_copy(update={"data_dir": args.data_dir})
    with Memory(config) as memory:
        build_server(memory).run("stdio")
    return 0


def _doctor_parser(sub: Any) -> None:
    dr = sub.add_parser("doctor", help="check that the vector store agrees with the event "
                        "log (JSON on stdout, a summary on stderr; exit 1 if problems are left)")
    dr.add_argument("--user", default=None, help="one user id; default: every user")
    dr.add_argument("--repair", action="store_true", help="fix what is safe through the "
                    "write path (re-write missing rows, delete orphans, expire what expired)")
    dr.add_argument("--verify-deleted", metavar="USER", default=None, help="list USER's "
                    "deletion receipts, each checked again: its digest, and no store holding "
                    "an id it names (exit 1 if one fails)")
    dr.add_argument("--candidate-days", type=int, default=30, help="candidates unconfirmed "
                    "this many days are overdue (default 30, as the nightly job)")
    dr.add_argument("--config", default=None, help="a MemoryConfig YAML; default: defaults")
    dr.add_argument("--data-dir", default=None, help="overrides the config's data_dir (an "
                    "embedded store belongs to one process: stop `memray api` first, or "
                    "use GET /v1/users/{id}/doctor)")


def doctor(args: argparse.Namespace) -> int:
    from memray.core.doctor import describe

    config = MemoryConfig.load(args.config) if args.config else MemoryConfig()
    if args.data_dir:
        config = config.model_copy(update={"data_dir": args.data_dir})
    if args.verify_deleted is not None:
        return verify_deleted(config, args.verify_deleted)
    with Memory(config) as memory:
        report = memory.doctor(args.user, repair=args.repair,
                               candidate_days=args.candidate_days)
    print(report.model_dump_json(indent=2))
    print(describe(report), file=sys.stderr)
    return 1 if report.problems else 0


def verify_deleted(config: MemoryConfig, user_id: str) -> int:
    with Memory(config) as memory:
        receipts = memory.deletions(user_id=user_id)
        checks = memory.verify_deletions(user_id=user_id)
    by_id = {c.receipt_id: c for c in checks}
    rows = [{"receipt": r.model_dump(mode="json"), "check": by_id[r.id].model_dump(mode="json")}
            for r in receipts if r.id in by_id]
    print(json.dumps(rows, indent=2, ensure_ascii=False))
    failed = [c for c in checks if not c.ok]
    print(f"{len(checks)} deletion receipt(s) for {user_id!r}: "
          f"{len(checks) - len(failed)} verified now, {len(failed)} failed"
          + "".join(f"\n  {c.receipt_id} ({c.kind}, {c.at:%Y-%m-%d %H:%M}): digest "
                    f"{'ok' if c.digest_ok else 'MISMATCH'}, still held: "
                    f"{ {k: v for k, v in c.remaining.items() if v} }" for c in failed),
          file=sys.stderr)
    return 1 if failed else 0


def api(args: argparse.Namespace) -> int:
    from memray.api.run import run_api
    from memray.config import MemoryConfig

    config = MemoryConfig.load(args.config) if args.config else MemoryConfig()
    if args.data_dir:
        config = config.model_copy(update={"data_dir": args.data_dir})
    run_api(config, args.keys, host=args.host, port=args.port, job_lease_s=args.job_lease_s)
    return 0


def bench_encryption(args: argparse.Namespace) -> int:
    from memray.bench.encryption import EncryptionBenchArgs
    from memray.bench.encryption import run as run_encryption

    print(json.dumps(run_encryption(EncryptionBenchArgs(
        users=args.users, per_user=args.per_user, queries=args.queries,
        rounds=args.rounds)), indent=2))
    return 0


def new_key(args: argparse.Namespace) -> int:
    from memray.api.auth import ApiKey, hash_key
    from memray.api.auth import new_key as make_key

    if args.keys == "master":
        from memray.crypto.keys import new_master_key

        print(new_master_key())
        return 0
    if not (args.user or args.user_prefix or args.admin):
        print("memray keys new: a key must name what it may act for: --user ID (repeat), "
              "--user-prefix PREFIX or --admin", file=sys.stderr)
        return 2
    key = make_key()
    entry = ApiKey(name=args.name, sha256=hash_key(key), users=args.user,
                   user_prefix=args.user_prefix, admin=args.admin)
    print(f"key (shown once; store it as a secret): {key}", file=sys.stderr)
    print(yaml.safe_dump({"keys": [entry.model_dump(exclude_defaults=True)]},
                         sort_keys=False), end="")
    print("add the entry to a keys file and run `memray api --keys FILE`, or list it under "
          "`args.keys` of a serve config (serve_configs/local.yaml) for `memray serve`",
          file=sys.stderr)
    return 0


def _set_value(raw: str) -> Any:
    """A `--set` value: JSON (0.2, true, [1, 2]), else the word itself (`hot_set=off`)."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _config_errors(config: dict[str, Any]) -> str:
    """What is wrong with the overrides, field by field ("" when nothing is)."""
    from pydantic import ValidationError

    from memray.config import MemoryConfig

    try:
        MemoryConfig.model_validate(config)
    except ValidationError as exc:
        return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
    return ""


def bench_locomo(args: argparse.Namespace) -> int:
    from memray.bench.locomo import LocomoArgs, run, table

    def say(line: str) -> None:
        print(line, file=sys.stderr)

    config: dict[str, Any] = {}
    if args.w_lexical is not None:
        config["recall"] = {"w_lexical": args.w_lexical}
    if args.reply_chars is not None:
        config["write"] = {"reply_context_chars": args.reply_chars}
    if args.embedder:
        config["embedder"] = {"model": args.embedder}
    for item in args.set:
        dotted, _, raw = item.partition("=")
        section, _, key = dotted.partition(".")
        if not key or not raw:
            print(f"--set {item!r}: expected SECTION.KEY=VALUE", file=sys.stderr)
            return 2
        config.setdefault(section, {})[key] = _set_value(raw)
    if bad := _config_errors(config):
        print(f"config override: {bad}", file=sys.stderr)
        return 2
    if args.cv and (args.rerank_llm or args.every != 1 or args.relevance):
        print("--cv takes every question, ranked only, and no reranker: drop --every / "
              "--rerank-llm / --relevance", file=sys.stderr)
        return 2
    if args.every < 1 or args.rerank_k < 1:
        print("--every and --rerank-k are at least 1", file=sys.stderr)
        return 2
    if args.cv:
        from memray.bench.locomo_cv import cross_validate, cv_table

        grid = ({k: tuple(v) for k, v in json.loads(args.grid).items()} if args.grid
                else None)
        cv = cross_validate(args.data, mode=args.mode, grid=grid, base=config, progress=say)
        print(json.dumps(cv, indent=2) if args.json else cv_table(cv))
        return 0
    rerank, totals = None, None
    if args.rerank_llm:
        from memray.bench.rerank import llm_reranker

        rerank, totals = llm_reranker(args.rerank_llm, args.rerank_k)
    result = run(LocomoArgs(data=args.data, mode=args.mode, config=config,
                            times=not args.no_times, every=args.every,
                            relevance=args.relevance), rerank=rerank,
                 progress=say)
    if totals:
        result["rerank"] = {"model": args.rerank_llm, "k": args.rerank_k, **totals}
        say(f"rerank: {json.dumps(result['rerank'])}")
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


def bench_soak(args: argparse.Namespace) -> int:
    from memray.bench.soak import SoakArgs, run

    result = run(SoakArgs(minutes=args.minutes, clients=args.clients, users=args.users,
                          target=args.target),
                 progress=lambda line: print(line, file=sys.stderr))
    print(json.dumps(result, indent=2))
    bad = result["error_count"] + result["lost"] + result["resurrected"] + \
        result["duplicated"] + result["doctor_problems"]
    return 0 if bad == 0 else 1


def bench_capacity(args: argparse.Namespace) -> int:
    from memray.bench.capacity import CapacityBenchArgs, predict, run, table

    try:
        capacities = tuple(int(c) for c in args.capacities.split(","))
    except ValueError:
        print("memray bench capacity: --capacities is integers, e.g. 256,1024", file=sys.stderr)
        return 2
    if min(args.users, args.requests, args.replicas, *capacities) < 1 or args.zipf <= 0:
        print("memray bench capacity: --users, --requests, --replicas and --capacities must "
              "be at least 1 and --zipf above 0", file=sys.stderr)
        return 2
    if args.model_only:
        print(json.dumps({c: predict(args.users, args.zipf, args.replicas, c)
                          for c in capacities}, indent=2))
        return 0
    result = run(CapacityBenchArgs(users=args.users, requests=args.requests, zipf=args.zipf,
                                   replicas=args.replicas, capacities=capacities),
                 progress=lambda line: print(line, file=sys.stderr))
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


def bench_embed(args: argparse.Namespace) -> int:
    from memray.bench.embedders import EmbedBenchArgs, run, table

    result = run(EmbedBenchArgs(model=args.model, runtimes=tuple(args.runtimes.split(",")),
                                threads=args.threads or os.cpu_count() or 1,
                                queries=args.queries, texts=args.texts,
                                rounds=args.rounds, recall=not args.no_recall),
                 progress=lambda line: print(line, file=sys.stderr))
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


def bench_serve(args: argparse.Namespace) -> int:
    if args.warmup < 0:
        print("memray bench serve: --warmup is seconds, 0 or more", file=sys.stderr)
        return 2
    cluster = (args.milvus_uri, args.postgres_dsn)
    if any(cluster) or args.replicas is not None:
        return _bench_serve_cluster(args)
    from memray.bench.serve import ServeBenchArgs, run

    seconds = 30.0 if args.seconds is None else args.seconds
    result = run(ServeBenchArgs(clients=args.clients, seconds=seconds, users=args.users,
                                url=args.url, key=args.key, config=args.config,
                                add_share=args.add_share, ingress=args.ingress,
                                warmup_s=args.warmup))
    print(json.dumps(result, indent=2))
    errors = sum(result[p]["errors"] for p in ("search", "one_client", "mixed"))
    return 0 if errors == 0 else 1


def _bench_serve_cluster(args: argparse.Namespace) -> int:
    from memray.bench.cluster import ClusterBenchArgs, parse_replicas, run

    if not (args.milvus_uri and args.postgres_dsn):
        print("memray bench serve: cluster mode needs both --milvus-uri and --postgres-dsn",
              file=sys.stderr)
        return 2
    if args.url is not None:
        print("memray bench serve: --url and cluster mode exclude each other", file=sys.stderr)
        return 2
    try:
        counts = parse_replicas(args.replicas or "1,2,3")
    except ValueError as exc:
        print(f"memray bench serve: {exc}", file=sys.stderr)
        return 2
    bench = ClusterBenchArgs(milvus_uri=args.milvus_uri, postgres_dsn=args.postgres_dsn,
                             replicas=counts, clients=args.clients,
                             seconds=20.0 if args.seconds is None else args.seconds,
                             users=args.users, spread=args.spread, add_share=args.add_share,
                             zipf=args.zipf, warmup_s=args.warmup,
                             baseline=not args.no_baseline)
    try:
        result = run(bench, progress=lambda line: print(line, file=sys.stderr))
    except KeyboardInterrupt:
        print("memray bench serve: interrupted (replicas stopped)", file=sys.stderr)
        return 130
    print(json.dumps(result, indent=2))
    return 0 if result["errors"] == 0 else 1


def bench_recall(args: argparse.Namespace) -> int:
    from memray.bench.recall import RecallBenchArgs, run

    result = run(RecallBenchArgs(users=args.users, per_user=args.per_user,
                                 queries=args.queries, milvus_uri=args.milvus_uri,
                                 data_dir=args.data_dir, hot_set=args.hot_set,
                                 postgres_dsn=args.postgres_dsn,
                                 query_users=args.query_users, runtime=args.runtime,
                                 questions=args.questions, write_every=args.write_every),
                 progress=lambda line: print(line, file=sys.stderr))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
