"""k8s/rayservice.yaml must embed serve_configs/gpu-cluster.yaml exactly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_rayservice_is_generated_from_the_gpu_config() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "k8s" / "generate.py"), "--check"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    manifest = yaml.safe_load((ROOT / "k8s" / "rayservice.yaml").read_text())
    embedded = yaml.safe_load(manifest["spec"]["serveConfigV2"])
    source = yaml.safe_load((ROOT / "serve_configs" / "gpu-cluster.yaml").read_text())
    assert embedded == source


def test_every_ray_container_switches_the_haproxy_ingress_on() -> None:
    from memray.serve_ingress import CLUSTER_ENV

    cluster = yaml.safe_load((ROOT / "k8s" / "rayservice.yaml").read_text())["spec"][
        "rayClusterConfig"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    containers = [c for g in groups for c in g["template"]["spec"]["containers"]]
    assert len(containers) == 1 + len(cluster["workerGroupSpecs"])
    for container in containers:
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert {k: env.get(k) for k in CLUSTER_ENV} == CLUSTER_ENV, container["name"]
