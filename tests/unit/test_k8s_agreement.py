"""The cluster manifests agree on memray's shared state.

Loaded: every manifest under k8s/ (multi-document YAML), the Milvus Helm values, the GPU serve
config serve_configs/gpu-cluster.yaml and its copy embedded in each RayService, and the job
configs embedded in ConfigMaps. Checked: one PostgreSQL secret (CloudNativePG's
`<cluster>-app`, key `uri`) for MEMRAY_POSTGRES_DSN; one Milvus address, the Helm release's
Service, everywhere; no DSN in any YAML; every path a container is told about is mounted in
it; no persistent volume for memray state (data_dir is scratch); the API scales out.

Who runs memray: every Ray head and worker container of a RayService, RayCluster or RayJob
(the serve replicas; the job drivers on the heads; the Ray tasks on the workers). A container
whose command is `ray job submit` only submits: what follows `--` runs as the driver on the
head of the cluster it submits to (`--address=http://<name>-head-svc:8265`), so the paths and
the environment of that entrypoint are checked on that head, not on the submitting pod (whose
environment `ray job submit` does not pass on).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
HELM_VALUES = K8S / "milvus-values.yaml"
SERVE_CONFIG = ROOT / "serve_configs" / "gpu-cluster.yaml"
# Every YAML of the repo that could carry a DSN by mistake.
ALL_YAML = sorted([*K8S.rglob("*.y*ml"), *(ROOT / "serve_configs").glob("*.y*ml"),
                   *(ROOT / "jobs" / "configs").glob("*.y*ml")])
DSN_ENV, MILVUS_ENV = "MEMRAY_POSTGRES_DSN", "MEMRAY_MILVUS_URI"
CNPG_API = "postgresql.cnpg.io/"
# Absolute paths under these come from a volume, never from the image (/app, /usr, ...).
MOUNTED_PREFIXES = ("/etc/", "/config", "/data", "/var/", "/mnt/", "/srv/", "/scratch",
                    "/secrets", "/models", "/opt/memray")
# Volume sources allowed in memray's pods: secrets, ConfigMaps and scratch.
ALLOWED_VOLUMES = {"secret", "configMap", "emptyDir", "projected", "downwardAPI"}
DSN_RE = re.compile(r"postgres(?:ql)?(?:\+\w+)?://", re.IGNORECASE)
URL_RE = re.compile(r"[a-z][a-z0-9+.-]*://[^\s\"'{}\[\],()]+", re.IGNORECASE)
HOST_PORT_RE = re.compile(r"(?<![\w./:-])[A-Za-z0-9_.-]+:\d{2,5}\b")
MILVUS_PORT = 19530


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@dataclass(frozen=True)
class Doc:
    file: str
    body: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body.get("kind"))

    @property
    def name(self) -> str:
        return str((self.body.get("metadata") or {}).get("name"))

    @property
    def where(self) -> str:
        return f"{self.file}: {self.kind} {self.name}"


@dataclass(frozen=True)
class Pod:
    doc: Doc
    role: str
    spec: dict[str, Any]
    ray_node: bool  # a Ray head or worker: memray code runs here


@dataclass(frozen=True)
class Container:
    pod: Pod
    body: dict[str, Any]

    @property
    def where(self) -> str:
        return f"{self.pod.doc.where} {self.pod.role} container {self.body.get('name')}"

    def env(self, name: str) -> dict[str, Any] | None:
        return next((e for e in self.body.get("env") or [] if e.get("name") == name), None)

    def mount_for(self, path: str) -> tuple[str, dict[str, Any]] | None:
        """The deepest volumeMount covering `path` and its volume."""
        volumes = {v["name"]: v for v in self.pod.spec.get("volumes") or []}
        best: tuple[str, dict[str, Any]] | None = None
        for m in self.body.get("volumeMounts") or []:
            at = m["mountPath"].rstrip("/") or "/"
            if (path == at or path.startswith(at + "/")) and (
                    best is None or len(at) > len(best[0])):
                best = (at, volumes.get(m["name"], {"name": m["name"]}))
        return best


def manifests() -> list[Doc]:
    docs = []
    for path in sorted(K8S.rglob("*.y*ml")):
        if path == HELM_VALUES:
            continue
        for body in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if body is None:
                continue
            assert isinstance(body, dict) and body.get("apiVersion") and body.get("kind"), (
                f"{rel(path)}: a document without apiVersion/kind; only manifests live under "
                "k8s/ (Helm values: add the file to HELM_VALUES in this test)")
            docs.append(Doc(rel(path), body))
    return docs


DOCS = manifests()


def ray_cluster_spec(doc: Doc) -> dict[str, Any] | None:
    spec = doc.body.get("spec") or {}
    return {"RayService": spec.get("rayClusterConfig"), "RayJob": spec.get("rayClusterSpec"),
            "RayCluster": spec}.get(doc.kind)


def pods(doc: Doc) -> Iterator[Pod]:
    spec = doc.body.get("spec") or {}
    cluster = ray_cluster_spec(doc)
    if cluster is not None:
        yield Pod(doc, "head", cluster["headGroupSpec"]["template"]["spec"], True)
        for group in cluster.get("workerGroupSpecs") or []:
            yield Pod(doc, f"worker group {group['groupName']}", group["template"]["spec"], True)
    if doc.kind == "RayJob" and spec.get("submitterPodTemplate"):
        yield Pod(doc, "submitter", spec["submitterPodTemplate"]["spec"], False)
    if doc.kind == "CronJob":
        yield Pod(doc, "job", spec["jobTemplate"]["spec"]["template"]["spec"], False)
    if doc.kind in ("Job", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"):
        yield Pod(doc, "pod", spec["template"]["spec"], False)
    if doc.kind == "Pod":
        yield Pod(doc, "pod", spec, False)


PODS = [p for d in DOCS for p in pods(d)]


def containers(pod: Pod) -> list[Container]:
    return [Container(pod, c) for c in
            [*(pod.spec.get("initContainers") or []), *(pod.spec.get("containers") or [])]]


CONTAINERS = [c for p in PODS for c in containers(p)]
RAY_CONTAINERS = [c for c in CONTAINERS if c.pod.ray_node]


def ray_container(pod: Pod) -> Container:
    return Container(pod, pod.spec["containers"][0])  # KubeRay: the Ray container is first


def head_of(doc: Doc) -> Container:
    return ray_container(next(p for p in pods(doc) if p.role == "head"))


def configmaps() -> dict[str, tuple[Doc, dict[str, Any]]]:
    return {d.name: (d, d.body.get("data") or {}) for d in DOCS if d.kind == "ConfigMap"}


def embedded_configs() -> Iterator[tuple[str, Any]]:
    """(where, parsed YAML) of the serve config, its embedded copies and ConfigMap files."""
    yield rel(SERVE_CONFIG), yaml.safe_load(SERVE_CONFIG.read_text(encoding="utf-8"))
    for d in DOCS:
        if d.kind == "RayService":
            yield f"{d.where} serveConfigV2", yaml.safe_load(d.body["spec"]["serveConfigV2"])
    for name, (d, data) in configmaps().items():
        for key, text in data.items():
            if key.endswith((".yaml", ".yml")):
                yield f"{d.file}: ConfigMap {name} key {key}", yaml.safe_load(text)


def walk(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key path, value) of every scalar in a parsed YAML tree."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, f"{path}[{i}]")
    else:
        yield path, node


def tokens(items: list[Any]) -> list[str]:
    out: list[str] = []
    for item in items:
        text = str(item)
        out += shlex.split(text) if any(ch.isspace() for ch in text) else [text]
    return out


def option(args: list[str], name: str) -> str | None:
    """The value of `--name=value` or `--name value`."""
    for i, t in enumerate(args):
        if t.startswith(name + "="):
            return t.split("=", 1)[1]
        if t == name and i + 1 < len(args):
            return args[i + 1]
    return None


def submit_split(args: list[str]) -> tuple[list[str], list[str]] | None:
    """For a `ray job submit ... -- <entrypoint>` command: (its own options, entrypoint)."""
    for i in range(len(args) - 2):
        if args[i:i + 3] == ["ray", "job", "submit"]:
            rest = args[i + 3:]
            cut = rest.index("--") if "--" in rest else len(rest)
            return args[:i + 3] + rest[:cut], rest[cut + 1:]
    return None


def submit_target(container: Container, own: list[str]) -> Doc | str:
    """The RayService/RayCluster a `ray job submit` reaches, or why none is found."""
    address = option(own, "--address") or (container.env("RAY_ADDRESS") or {}).get("value")
    if not address:
        return "submits without --address"
    host = urlsplit(address if "://" in address else f"http://{address}").hostname or ""
    service = host.split(".")[0]
    for d in DOCS:
        if d.kind in ("RayService", "RayCluster") and service == f"{d.name}-head-svc":
            return d
    return (f"submits to {address}, but no RayService or RayCluster under k8s/ has the head "
            f"Service {service!r}")


def entrypoints() -> Iterator[tuple[str, list[str], Container]]:
    """(who, entrypoint args, the container the driver runs in) of every job."""
    for d in DOCS:
        if d.kind == "RayJob":
            yield f"{d.where} entrypoint", tokens([d.body["spec"]["entrypoint"]]), head_of(d)
    for c in CONTAINERS:
        split = submit_split(tokens([*(c.body.get("command") or []),
                                     *(c.body.get("args") or [])]))
        if split is not None:
            target = submit_target(c, split[0])
            if isinstance(target, Doc):
                yield f"{c.where} (ray job submit to {target.where})", split[1], head_of(target)


def milvus_address() -> str:
    """The Milvus Service of the Helm release that k8s/milvus-values.yaml configures."""
    text = HELM_VALUES.read_text(encoding="utf-8")
    values = yaml.safe_load(text) or {}
    where = rel(HELM_VALUES)
    name = values.get("fullnameOverride")
    assert name, f"{where}: set fullnameOverride, so the Milvus Service name is fixed"
    port = (values.get("service") or {}).get("port", MILVUS_PORT)
    found = re.search(r"helm (?:upgrade --install|install) \S+ \S+.*?(?:-n|--namespace)[ =]"
                      r"([a-z0-9-]+)", text)
    assert found, f"{where}: no `helm install <release> <chart> -n <namespace>` line says " \
                  "which namespace Milvus runs in"
    return f"http://{name}.{found.group(1)}.svc.cluster.local:{port}"


def postgres_secret() -> dict[str, str]:
    clusters = [d for d in DOCS if d.kind == "Cluster"
                and str(d.body.get("apiVersion")).startswith(CNPG_API)]
    assert len(clusters) == 1, ("expected exactly one CloudNativePG Cluster under k8s/, found "
                                f"{[c.where for c in clusters]}")
    return {"name": f"{clusters[0].name}-app", "key": "uri"}


def report(problems: list[str]) -> None:
    if problems:
        pytest.fail("\n".join(["", *problems]), pytrace=False)


def test_the_postgres_cluster_is_a_cloudnativepg_cluster_with_an_app_database() -> None:
    postgres_secret()
    (cluster,) = [d for d in DOCS if d.kind == "Cluster"]
    spec = cluster.body.get("spec") or {}
    initdb = ((spec.get("bootstrap") or {}).get("initdb")) or {}
    problems = []
    if int(spec.get("instances", 1)) < 3:
        problems.append(f"{cluster.where}: instances {spec.get('instances')}, want 3 or more "
                        "(a primary and two replicas to fail over to)")
    if not (spec.get("storage") or {}).get("size"):
        problems.append(f"{cluster.where}: no storage.size")
    if not (initdb.get("database") and initdb.get("owner")):
        problems.append(f"{cluster.where}: bootstrap.initdb needs database and owner (the app "
                        "secret's uri is the owner's DSN for that database)")
    report(problems)


def test_memray_containers_take_the_dsn_from_the_cloudnativepg_app_secret() -> None:
    want = postgres_secret()
    problems = []
    for c in CONTAINERS:
        env = c.env(DSN_ENV)
        if env is None:
            if c.pod.ray_node:
                problems.append(f"{c.where}: no {DSN_ENV} (runs memray, so it needs the "
                                f"shared event log from secret {want['name']}/{want['key']})")
            continue
        ref = (env.get("valueFrom") or {}).get("secretKeyRef") or {}
        got = {"name": ref.get("name"), "key": ref.get("key")}
        if "value" in env or got != want:
            problems.append(f"{c.where}: {DSN_ENV} comes from "
                            f"{'a literal value' if 'value' in env else got}, want secretKeyRef "
                            f"{want} (the CloudNativePG Cluster's app secret)")
    for c in CONTAINERS:
        for source in c.body.get("envFrom") or []:
            if "secretRef" in source:
                problems.append(f"{c.where}: envFrom secret {source['secretRef'].get('name')}; "
                                f"name {DSN_ENV} explicitly instead")
    report(problems)


def test_the_drivers_of_submitted_jobs_run_where_the_shared_state_is() -> None:
    want = postgres_secret()
    problems = []
    for c in CONTAINERS:
        split = submit_split(tokens([*(c.body.get("command") or []),
                                     *(c.body.get("args") or [])]))
        if split is None:
            continue
        target = submit_target(c, split[0])
        if not isinstance(target, Doc):
            problems.append(f"{c.where}: {target}")
            continue
        head = head_of(target)
        ref = ((head.env(DSN_ENV) or {}).get("valueFrom") or {}).get("secretKeyRef") or {}
        if {"name": ref.get("name"), "key": ref.get("key")} != want:
            problems.append(f"{c.where}: its driver runs on {head.where}, which does not take "
                            f"{DSN_ENV} from {want}")
        if head.env(MILVUS_ENV) is None:
            problems.append(f"{c.where}: its driver runs on {head.where}, which has no "
                            f"{MILVUS_ENV}")
    report(problems)


def test_memray_containers_take_milvus_from_one_configmap_with_the_helm_address() -> None:
    want = milvus_address()
    problems = []
    cms = configmaps()
    refs = set()
    for c in CONTAINERS:
        env = c.env(MILVUS_ENV)
        if env is None:
            if c.pod.ray_node:
                problems.append(f"{c.where}: no {MILVUS_ENV} (runs memray)")
            continue
        ref = (env.get("valueFrom") or {}).get("configMapKeyRef")
        if ref is None:
            problems.append(f"{c.where}: {MILVUS_ENV} is {env.get('value')!r}, not from the "
                            "shared ConfigMap (configMapKeyRef)")
            continue
        refs.add((ref.get("name"), ref.get("key")))
        value = cms.get(ref.get("name"), (None, {}))[1].get(ref.get("key"))
        if value != want:
            problems.append(f"{c.where}: {MILVUS_ENV} from ConfigMap {ref.get('name')} key "
                            f"{ref.get('key')} is {value!r}, want {want!r} (the Service of "
                            f"{rel(HELM_VALUES)})")
    if len(refs) > 1:
        problems.append(f"{MILVUS_ENV} comes from several ConfigMap keys {sorted(refs)}; use one")
    report(problems)


def _milvus_mentions(line: str) -> Iterator[str]:
    """Milvus addresses in a line: URLs whose host names milvus or whose port is Milvus's,
    and bare host:port pairs of the same kind."""
    for found in URL_RE.findall(line):
        url = found.rstrip(".:;")
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            port = None
        if "milvus" in (parts.hostname or "") or port == MILVUS_PORT:
            yield url
    for hp in HOST_PORT_RE.findall(URL_RE.sub(" ", line)):
        if "milvus" in hp.split(":")[0] or hp.endswith(f":{MILVUS_PORT}"):
            yield hp


def test_every_milvus_address_mentioned_is_the_helm_service() -> None:
    """The text of each file (comments, embedded configs, ConfigMap data included), the
    `milvus_uri` keys of the configs and every --milvus-uri option."""
    want = milvus_address()
    problems = []
    for path in [*sorted(K8S.rglob("*.y*ml")), SERVE_CONFIG]:
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            problems += [f"{rel(path)}:{no}: Milvus address {found!r}, want {want!r}"
                         for found in _milvus_mentions(line) if found != want]
    for where, config in embedded_configs():
        for key, value in walk(config):
            if key.split(".")[-1] == "milvus_uri" and value is not None and value != want:
                problems.append(f"{where}: {key} is {value!r}, want {want!r} (or leave it "
                                f"unset: {MILVUS_ENV} is set on every pod)")
    commands = [(who, args) for who, args, _ in entrypoints()] + [
        (c.where, tokens([*(c.body.get("command") or []), *(c.body.get("args") or [])]))
        for c in CONTAINERS]
    for who, args in commands:
        value = option(args, "--milvus-uri")
        if value is not None and value != want:
            problems.append(f"{who}: --milvus-uri {value!r}, want {want!r}")
    report(problems)


def test_no_dsn_in_any_yaml() -> None:
    problems = []
    for path in ALL_YAML:
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if DSN_RE.search(line):
                problems.append(f"{rel(path)}:{no}: a PostgreSQL DSN in YAML (it holds the "
                                f"password); set {DSN_ENV} from the secret instead")
    for where, config in embedded_configs():
        for key, value in walk(config):
            if key.split(".")[-1] == "postgres_dsn" and value is not None:
                problems.append(f"{where}: {key} is set; leave it unset, {DSN_ENV} comes from "
                                "the secret")
    report(problems)


def _check_path(problems: list[str], who: str, path: str, c: Container) -> None:
    if not path.startswith(MOUNTED_PREFIXES):
        return
    found = c.mount_for(path)
    if found is None:
        problems.append(f"{who}: names {path}, but no volumeMount of {c.where} covers it")
        return
    at, volume = found
    cm = volume.get("configMap")
    name = (cm or {}).get("name")
    data = configmaps().get(name, (None, None))[1]
    inside = path[len(at):].lstrip("/")
    if cm is not None and data is not None and inside and "/" not in inside \
            and not cm.get("items") and inside not in data:
        problems.append(f"{who}: names {path}, but ConfigMap {name} (mounted at {at} in "
                        f"{c.where}) has no key {inside!r}; it has {sorted(data)}")


def test_paths_on_command_lines_are_mounted() -> None:
    problems: list[str] = []
    for c in CONTAINERS:
        args = tokens([*(c.body.get("command") or []), *(c.body.get("args") or [])])
        split = submit_split(args)
        own = split[0] if split else args
        for t in own:
            _check_path(problems, c.where, t.split("=", 1)[-1], c)
    for who, args, driver in entrypoints():
        for t in args:
            _check_path(problems, who, t.split("=", 1)[-1], driver)
    report(problems)


def _check_config_paths(problems: list[str], where: str, config: dict[str, Any],
                        runs_in: list[Container]) -> None:
    data_dir = (config.get("memory") or {}).get("data_dir")
    if not (isinstance(data_dir, str) and data_dir.startswith("/")):
        problems.append(f"{where}: memory.data_dir {data_dir!r} is not an absolute path on a "
                        "scratch emptyDir")
        data_dir = None
    for c in runs_in:
        found = c.mount_for(data_dir) if data_dir else None
        if data_dir and (found is None or "emptyDir" not in found[1]):
            problems.append(f"{where}: memory.data_dir {data_dir} is not on an emptyDir in "
                            f"{c.where} (it is scratch: no state may live there)")
        for key, value in walk(config):
            if isinstance(value, str) and value.startswith("/") and key != "memory.data_dir":
                _check_path(problems, f"{where}: {key}", value, c)


def test_paths_in_configs_are_mounted_and_data_dir_is_scratch() -> None:
    problems: list[str] = []
    for d in DOCS:
        if d.kind != "RayService":
            continue
        config = yaml.safe_load(d.body["spec"]["serveConfigV2"])
        workers = [ray_container(p) for p in pods(d) if p.role.startswith("worker")]
        for app in config.get("applications") or []:
            if app.get("import_path") == "memray.serve:build_app":
                # The API replicas may be placed on any worker.
                _check_config_paths(problems, f"{d.where} serveConfigV2 app {app['name']}",
                                    app.get("args") or {}, workers)
    for who, args, driver in entrypoints():
        path = option(args, "--config")
        found = driver.mount_for(path) if path else None
        if path is None or found is None or "configMap" not in found[1]:
            continue  # a missing mount is reported by the command-line test
        name = found[1]["configMap"]["name"]
        text = configmaps().get(name, (None, {}))[1].get(path[len(found[0]):].lstrip("/"))
        if text is not None:
            _check_config_paths(problems, f"{who} --config {path} (ConfigMap {name})",
                                yaml.safe_load(text) or {}, [driver])
    report(problems)


def test_no_persistent_volume_holds_memray_state() -> None:
    problems = []
    for d in DOCS:
        if d.kind in ("PersistentVolumeClaim", "PersistentVolume"):
            problems.append(f"{d.where}: memray's state is in PostgreSQL and Milvus; no volume")
        if (d.body.get("spec") or {}).get("volumeClaimTemplates"):
            problems.append(f"{d.where}: volumeClaimTemplates; memray pods keep no state")
    for p in PODS:
        for v in p.spec.get("volumes") or []:
            kinds = set(v) - {"name"}
            if not kinds <= ALLOWED_VOLUMES:
                problems.append(f"{p.doc.where} {p.role}: volume {v['name']} is "
                                f"{sorted(kinds - ALLOWED_VOLUMES)}; memray's state is in "
                                "PostgreSQL and Milvus, use an emptyDir for scratch")
    report(problems)


def test_referenced_configmaps_exist_in_one_namespace() -> None:
    problems = []
    cms = configmaps()
    for c in CONTAINERS:
        for e in c.body.get("env") or []:
            ref = (e.get("valueFrom") or {}).get("configMapKeyRef")
            if ref and ref.get("key") not in cms.get(ref.get("name"), (None, {}))[1]:
                problems.append(f"{c.where}: env {e['name']} reads ConfigMap {ref.get('name')} "
                                f"key {ref.get('key')}, which no manifest under k8s/ defines")
    for p in PODS:
        for v in p.spec.get("volumes") or []:
            if "configMap" in v and v["configMap"].get("name") not in cms:
                problems.append(f"{p.doc.where} {p.role}: volume {v['name']} mounts ConfigMap "
                                f"{v['configMap'].get('name')}, which no manifest defines")
    namespaces = {d.body.get("metadata", {}).get("namespace") for d in DOCS}
    if len(namespaces) > 1:
        problems.append(f"manifests under k8s/ name several namespaces {namespaces}; secret and "
                        "ConfigMap references only work within one")
    report(problems)


def _api_problems(where: str, config: dict[str, Any]) -> list[str]:
    apps = [a for a in config.get("applications") or []
            if a.get("import_path") == "memray.serve:build_app"]
    shapes = {d.get("name"): d for a in apps for d in a.get("deployments") or []}
    api = shapes.get("memray-api")
    if api is None:
        return [f"{where}: no memray-api deployment"]
    problems = []
    scaling = api.get("autoscaling_config") or {}
    if "num_replicas" in api:
        problems.append(f"{where}: memray-api has num_replicas {api['num_replicas']}; it "
                        "autoscales (autoscaling_config) instead")
    low, high = scaling.get("min_replicas", 0), scaling.get("max_replicas", 0)
    if low < 2:
        problems.append(f"{where}: memray-api autoscaling_config.min_replicas is {low}, want "
                        ">= 2 (the API is stateless in cluster mode)")
    if high < low:
        problems.append(f"{where}: memray-api max_replicas {high} < min_replicas {low}")
    return problems


def test_the_api_deployment_scales_out() -> None:
    problems = _api_problems(rel(SERVE_CONFIG),
                             yaml.safe_load(SERVE_CONFIG.read_text(encoding="utf-8")))
    for d in DOCS:
        if d.kind == "RayService":
            problems += _api_problems(f"{d.where} serveConfigV2",
                                      yaml.safe_load(d.body["spec"]["serveConfigV2"]))
    report(problems)
