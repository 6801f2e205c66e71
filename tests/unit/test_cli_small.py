"""Small CLI promises: keys must be scoped, serve finds its config anywhere, help lists jobs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from memray.cli import main
from memray.serve_config import default_serve_config


def test_a_key_with_no_scope_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "new", "--name", "nobody"]) == 2
    assert "--user" in capsys.readouterr().err
    assert main(["keys", "new", "--name", "lin", "--user", "lin"]) == 0
    out = capsys.readouterr()
    assert yaml.safe_load(out.out)["keys"][0]["users"] == ["lin"]
    assert "memray api --keys" in out.err


def test_serve_config_ships_in_the_package(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # not a checkout: the packaged copy
    packaged = Path(default_serve_config())
    assert packaged.is_file() and "memray" in packaged.parts
    assert yaml.safe_load(packaged.read_text())["applications"][0]["import_path"] == \
        "memray.serve:build_app"
    (tmp_path / "serve_configs").mkdir()
    (tmp_path / "serve_configs" / "local.yaml").write_text("x: 1\n")
    assert default_serve_config() == "serve_configs/local.yaml"  # a checkout's own wins


def test_jobs_help_lists_the_jobs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["jobs", "--help"])
    out = capsys.readouterr().out
    assert all(job in out for job in ("backfill", "maintenance", "migrate"))


def test_bench_serve_finds_the_packaged_config_outside_a_checkout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memray.bench.serve import ServeBenchArgs, config_path

    monkeypatch.chdir(tmp_path)  # it once failed here: FileNotFoundError serve_configs/...
    assert Path(config_path(ServeBenchArgs())).is_file()
    assert config_path(ServeBenchArgs(config="mine.yaml")) == "mine.yaml"


def test_bench_serve_passes_the_warmup_and_refuses_a_negative_one(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from memray.bench import cluster

    seen = []

    def fake_run(args: cluster.ClusterBenchArgs, progress: object) -> dict[str, object]:
        seen.append(args.warmup_s)  # the run itself is tests/integration/test_bench_cluster
        return {"errors": 0, "rows": []}

    monkeypatch.setattr(cluster, "run", fake_run)
    uri = ["--milvus-uri", "http://127.0.0.1:1", "--postgres-dsn", "postgresql://x"]
    assert main(["bench", "serve", *uri, "--warmup", "-1"]) == 2
    assert "--warmup" in capsys.readouterr().err
    assert main(["bench", "serve", *uri, "--warmup", "40"]) == 0
    assert main(["bench", "serve", *uri]) == 0
    assert seen == [40.0, 3.0]


@pytest.mark.parametrize(("extra", "said"), [
    (["--cv", "--rerank-llm", "qwen2.5-coder-1.5b-instruct-q4_k_m"], "--cv takes every"),
    (["--cv", "--every", "3"], "--cv takes every"),
    (["--cv", "--relevance"], "--cv takes every"),
    (["--every", "0"], "at least 1"),
    (["--rerank-k", "0"], "at least 1"),
    (["--set", "recall.hot_set=bogus"], "recall.hot_set: Input should be 'auto', 'on' or 'off'"),
    (["--set", "recall.nope=1"], "recall.nope: Extra inputs"),
    (["--set", "recall.w_date"], "expected SECTION.KEY=VALUE"),
])
def test_locomo_options_that_cannot_work_together_are_refused(
        extra: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "locomo", "--data", "missing.json", *extra]) == 2
    assert said in capsys.readouterr().err


def test_a_set_value_is_json_else_the_word() -> None:
    from memray.cli import _set_value

    assert [_set_value(v) for v in ("0.2", "true", "[1, 2]", "off", "Asia/Shanghai")] == [
        0.2, True, [1, 2], "off", "Asia/Shanghai"]
