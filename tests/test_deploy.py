"""Checks for the deployment targets under deploy/.

Nothing here builds an image or talks to a cluster: the files are parsed and
checked for the mistakes that only show up at 2 a.m. on the real target
(removed executables, flags the installed `dask worker` no longer accepts,
operator keys in the wrong place, a CronJob that can overlap itself, an image
whose pins drift from what the tests ran). The Slurm script is also executed
for real against a fake `srun` that starts a local scheduler and workers.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
DASKJOB = DEPLOY / "kubernetes" / "daskjob.yaml"
SCORE_DASKJOB = DEPLOY / "kubernetes" / "score-daskjob.yaml"
DASKCLUSTER = DEPLOY / "kubernetes" / "daskcluster.yaml"
CRONJOB = DEPLOY / "kubernetes" / "nightly-cronjob.yaml"
SBATCH = DEPLOY / "slurm" / "evalcore.sbatch"
DOCKERFILE = DEPLOY / "Dockerfile"
REQUIREMENTS = DEPLOY / "requirements.txt"
README = DEPLOY / "README.md"

DASK_API = "kubernetes.dask.org/v1"
# The pins the image must carry (and the test environment must run).
EXPECTED_PINS = {
    "dask", "distributed", "zarr", "numpy", "pyarrow", "fsspec", "s3fs",
    "scipy", "threadpoolctl", "tqdm", "numba",
}
SHELL_STOP = {"&", "&&", ";", "|", "||", ")", "`", "EOF"}


# --------------------------------------------------------------------------- helpers


def deploy_files() -> list[Path]:
    skip = {"__pycache__", "data", "minio-data"}
    return sorted(
        p for p in DEPLOY.rglob("*")
        if p.is_file() and not (skip & set(p.relative_to(DEPLOY).parts))
    )


def yaml_docs(path: Path) -> list:
    with path.open() as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def one_doc(path: Path, kind: str) -> dict:
    docs = [d for d in yaml_docs(path) if d.get("kind") == kind]
    assert len(docs) == 1, f"{path.name}: expected exactly one {kind}, found {len(docs)}"
    return docs[0]


def compose() -> dict:
    return yaml_docs(COMPOSE)[0]


def tokens(cmd) -> list[str]:
    """A compose/k8s command (list or string) as a list of argv tokens."""
    if cmd is None:
        return []
    if isinstance(cmd, str):
        return shlex.split(cmd)
    return [str(c) for c in cmd]


def container_argv(container: dict) -> list[str]:
    return tokens(container.get("command")) + tokens(container.get("args"))


def flag_value(argv: list[str], flag: str) -> str | None:
    for i, tok in enumerate(argv):
        if tok == flag and i + 1 < len(argv):
            return argv[i + 1]
        if tok.startswith(flag + "="):
            return tok.split("=", 1)[1]
    return None


def has_flag(argv: list[str], flag: str) -> bool:
    return any(t == flag or t.startswith(flag + "=") for t in argv)


def _split_line(line: str) -> list[str]:
    line = line.replace("`", " ` ")
    try:
        return shlex.split(line)
    except ValueError:  # unbalanced quotes in prose
        return line.split()


def _after(toks: list[str], prog: str, role: str) -> list[list[str]]:
    out = []
    for i in range(len(toks) - 1):
        if toks[i] == prog and toks[i + 1] == role:
            rest = []
            for t in toks[i + 2:]:
                if t in SHELL_STOP:
                    break
                rest.append(t)
            out.append(rest)
    return out


def _walk_yaml(node, prog: str, role: str, found: list):
    if isinstance(node, dict):
        for v in node.values():
            _walk_yaml(v, prog, role, found)
    elif isinstance(node, list):
        if all(isinstance(x, (str, int, float)) for x in node):
            found.extend(_after([str(x) for x in node], prog, role))
            for x in node:  # e.g. ["sh", "-c", "evalcore evaluate ..."]
                if isinstance(x, str) and f"{prog} {role}" in x:
                    found.extend(_after(_split_line(x.replace("\n", " ")), prog, role))
        else:
            for v in node:
                _walk_yaml(v, prog, role, found)
    elif isinstance(node, str) and f"{prog} {role}" in node:
        for line in node.splitlines():
            found.extend(_after(_split_line(line), prog, role))


def invocations(prog: str, role: str) -> dict[Path, list[list[str]]]:
    """Arguments after every `<prog> <role>` in deploy/, by file (YAML structurally,
    shell/Markdown/Dockerfile text line by line with continuations joined)."""
    result: dict[Path, list[list[str]]] = {}
    for path in deploy_files():
        found: list[list[str]] = []
        if path.suffix in {".yaml", ".yml"}:
            for doc in yaml_docs(path):
                _walk_yaml(doc, prog, role, found)
        else:
            text = path.read_text(errors="replace").replace("\\\n", " ")
            if path.suffix == ".md":  # inline `code` may wrap across lines
                text = re.sub(r"(?<!`)`[^`]+`(?!`)", lambda m: m.group(0).replace("\n", " "), text)
            for line in text.splitlines():
                if f"{prog} {role}" in line:
                    found.extend(_after(_split_line(line), prog, role))
        if found:
            result[path] = found
    return result


def flags_of(argv: list[str]) -> set[str]:
    return {t.split("=", 1)[0] for t in argv if t.startswith("--")}


def cli_help(prog: str, *sub: str) -> str:
    exe = Path(sys.executable).with_name(prog)
    assert exe.exists(), f"no `{prog}` executable next to {sys.executable}"
    proc = subprocess.run(
        [str(exe), *sub, "--help"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"`{prog} {' '.join(sub)} --help` failed:\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def help_text() -> dict[str, str]:
    return {role: cli_help("dask", role) for role in ("worker", "scheduler")}


def unknown_flags(found: dict[Path, list[list[str]]], help_: str, what: str) -> list[str]:
    bad = []
    for path, argvs in found.items():
        for argv in argvs:
            for flag in sorted(flags_of(argv)):
                if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_):
                    bad.append(f"{path.relative_to(ROOT)}: {what} {flag}")
    return bad


def requirement_pins() -> dict[str, str]:
    pins = {}
    for raw in REQUIREMENTS.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep and version.strip(), f"requirements.txt line not pinned with ==: {raw!r}"
        pins[name.strip().lower()] = version.strip()
    return pins


def k8s_containers(pod_spec: dict) -> list[dict]:
    return list(pod_spec.get("containers") or [])


def env_names(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env") or []}


# --------------------------------------------------------------------------- all files


def test_expected_files_exist():
    for path in (COMPOSE, DASKJOB, SCORE_DASKJOB, DASKCLUSTER, CRONJOB, SBATCH, DOCKERFILE, REQUIREMENTS,
                 README, DEPLOY / "compose-ci.sh"):
        assert path.is_file(), f"missing {path.relative_to(ROOT)}"


@pytest.mark.parametrize(
    "path", [p for p in deploy_files() if p.suffix in {".yaml", ".yml"}],
    ids=lambda p: str(p.relative_to(DEPLOY)),
)
def test_yaml_loads(path):
    docs = yaml_docs(path)
    assert docs, f"{path} has no YAML documents"
    for doc in docs:
        assert isinstance(doc, dict), f"{path}: top-level YAML document is not a mapping"


def test_no_removed_dashed_dask_executables():
    offenders = []
    for path in deploy_files():
        text = path.read_text(errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            if "dask-worker" in line or "dask-scheduler" in line:
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, (
        "`dask-worker`/`dask-scheduler` were removed from distributed; use "
        "`dask worker`/`dask scheduler`:\n" + "\n".join(offenders)
    )


@pytest.mark.parametrize("role", ["worker", "scheduler"])
def test_dask_cli_flags_exist_in_installed_distributed(role, help_text):
    found = invocations("dask", role)
    # Every target that starts Dask processes must be covered, or this test
    # would pass vacuously after a rename.
    for must in (COMPOSE, DASKJOB, DASKCLUSTER, SBATCH):
        assert must in found, f"no `dask {role}` invocation found in {must.relative_to(ROOT)}"
    bad = unknown_flags(found, help_text[role], f"dask {role}")
    assert not bad, f"flags unknown to the installed `dask {role} --help`:\n" + "\n".join(bad)


def test_worker_invocations_are_single_threaded_with_memory_limit():
    found = invocations("dask", "worker")
    for path in (COMPOSE, DASKJOB, DASKCLUSTER, SBATCH):
        for argv in found.get(path, []):
            where = f"{path.relative_to(ROOT)}: dask worker {' '.join(argv)}"
            assert flag_value(argv, "--nthreads") == "1", f"--nthreads 1 missing: {where}"
            if has_flag(argv, "--nworkers"):
                assert flag_value(argv, "--nworkers") == "1", f"--nworkers must be 1: {where}"
            assert flag_value(argv, "--memory-limit"), f"explicit --memory-limit missing: {where}"


def test_evalcore_evaluate_flags_exist_in_the_cli():
    found = invocations("evalcore", "evaluate")
    for must in (COMPOSE, DASKJOB, SBATCH, README):
        assert must in found, f"no `evalcore evaluate` invocation found in {must.relative_to(ROOT)}"
    bad = unknown_flags(found, cli_help("evalcore", "evaluate"), "evalcore evaluate")
    assert not bad, "flags unknown to `evalcore evaluate --help`:\n" + "\n".join(bad)


@pytest.mark.parametrize("sub", ["nightly", "score"])
def test_other_evalcore_subcommand_flags_exist_in_the_cli(sub):
    found = invocations("evalcore", sub)
    assert found, f"deploy/ never shows how to run `evalcore {sub}`"
    top = cli_help("evalcore")
    if not re.search(rf"\b{sub}\b", top):
        pytest.skip(f"`evalcore {sub}` is not in the CLI yet")
    bad = unknown_flags(found, cli_help("evalcore", sub), f"evalcore {sub}")
    assert not bad, f"flags unknown to `evalcore {sub} --help`:\n" + "\n".join(bad)


# --------------------------------------------------------------------------- imports in the tests


def _test_sources() -> list[Path]:
    return sorted(p for p in (ROOT / "tests").rglob("*.py") if "__pycache__" not in p.parts)


def _top_level_names(path: Path) -> set[str]:
    """Names a helper module defines at its top level (what `from helper import NAME` can get)."""
    import ast

    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def stale_imports(sources: list[Path]) -> list[str]:
    """Every `import evalcore...` / `from evalcore... import NAME` and every import of a test helper
    module (conftest, reference, ranklists, test_deploy, ...) in the given files, at any depth
    (inside functions and fixtures too), that does not resolve. Third-party imports are left alone."""
    import ast
    import importlib

    helpers: dict[str, list[Path]] = {}
    for p in _test_sources():
        helpers.setdefault(p.stem, []).append(p)

    def evalcore_module(name: str) -> str | None:
        try:
            importlib.import_module(name)
        except ImportError as e:
            return f"{name}: {e}"
        return None

    bad = []
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            where = f"{shown}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    if top == "evalcore" and (err := evalcore_module(alias.name)):
                        bad.append(f"{where}: import {err}")
                    elif top in helpers and "." not in alias.name and len(helpers[top]) != 1:
                        bad.append(f"{where}: import {alias.name}: {len(helpers[top])} helper files of that name")
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                top = node.module.split(".")[0]
                wanted = [a.name for a in node.names if a.name != "*"]
                if top == "evalcore":
                    if err := evalcore_module(node.module):
                        bad.append(f"{where}: from {err}")
                        continue
                    module = importlib.import_module(node.module)
                    for name in wanted:
                        if not hasattr(module, name) and evalcore_module(f"{node.module}.{name}"):
                            bad.append(f"{where}: from {node.module} import {name}: no such name or module")
                elif top in helpers and node.module == top:
                    if len(helpers[top]) != 1:
                        bad.append(f"{where}: from {top}: {len(helpers[top])} helper files of that name")
                        continue
                    missing = set(wanted) - _top_level_names(helpers[top][0])
                    if missing:
                        bad.append(f"{where}: from {top} import {sorted(missing)}: not defined in "
                                   f"{helpers[top][0].relative_to(ROOT)}")
    return bad


def test_every_evalcore_and_helper_import_in_the_tests_resolves():
    """Imports inside test functions and fixtures only run when the test does; the deploy tests
    (tests/test_deploy_real.py) run only under deploy/test-here.sh, and ruff and mypy do not
    resolve them. So a moved module (evalcore.synthetic -> evalcore.jobs.synthetic) would
    break them silently: resolve every such import here, in the normal suite."""
    bad = stale_imports(_test_sources())
    assert not bad, "imports in tests/ that do not resolve:\n" + "\n".join(bad)


def test_the_stale_import_check_is_not_vacuous(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(textwrap.dedent("""
        from evalcore.jobs import synthetic
        import evalcore.io.dataset

        def later():
            from evalcore import synthetic
            from evalcore.jobs.synthetic import write_clustered, no_such_function
            import evalcore.no_such_module
            from conftest import random_reid, no_such_helper
    """))
    bad = stale_imports([probe])
    text = "\n".join(bad)
    assert len(bad) == 4, text
    for what in ("from evalcore import synthetic", "no_such_function", "evalcore.no_such_module", "no_such_helper"):
        assert what in text, text


# --------------------------------------------------------------------------- compose


def test_compose_services():
    services = compose()["services"]
    for name in ("scheduler", "worker", "job"):
        assert name in services, f"compose service {name!r} missing"


def test_compose_scheduler():
    sched = compose()["services"]["scheduler"]
    argv = tokens(sched["command"])
    assert argv[:2] == ["dask", "scheduler"], argv
    ports = " ".join(str(p) for p in sched.get("ports", []))
    assert "8786" in ports and "8787" in ports, f"scheduler ports: {ports}"
    hc = sched.get("healthcheck") or {}
    assert hc.get("test"), "scheduler needs a healthcheck"
    assert "8787" in " ".join(tokens(hc["test"])), "healthcheck should probe the HTTP port"


def test_compose_worker_is_scalable():
    worker = compose()["services"]["worker"]
    argv = tokens(worker["command"])
    assert argv[:3] == ["dask", "worker", "tcp://scheduler:8786"], argv
    assert "container_name" not in worker, "container_name breaks --scale worker=N"
    assert not worker.get("ports"), "fixed host ports break --scale worker=N"
    assert "scale" not in worker and "replicas" not in (worker.get("deploy") or {}), (
        "leave the replica count to `docker compose up --scale worker=N`"
    )


def _data_source(service: dict) -> str | None:
    for vol in service.get("volumes") or []:
        if isinstance(vol, str):
            # SOURCE:/data[:MODE]; SOURCE may itself contain ":" (${VAR:-default})
            m = re.fullmatch(r"(.+):(/data)(?::[a-zA-Z,]+)?", vol)
            if m:
                return m.group(1)
        elif vol.get("target") == "/data":
            return vol.get("source")
    return None


def test_compose_job():
    services = compose()["services"]
    job = services["job"]
    argv = tokens(job["command"])
    assert argv[:2] == ["evalcore", "evaluate"], argv
    assert flag_value(argv, "--scheduler") == "tcp://scheduler:8786", argv
    assert flag_value(argv, "--out"), argv
    assert not has_flag(argv, "--workers"), "--workers and --scheduler are alternatives"
    deps = job.get("depends_on") or {}
    assert "scheduler" in deps, "job must depend on the scheduler"
    if isinstance(deps, dict):
        assert deps["scheduler"].get("condition") == "service_healthy"
    src = _data_source(job)
    assert src, "job needs a volume at /data"
    # Tasks open the dataset on the workers, so they must see the same /data.
    assert _data_source(services["worker"]) == src, "worker and job must mount the same /data"


def test_compose_uses_one_image_for_all_roles():
    services = compose()["services"]
    images = {name: services[name].get("image") for name in ("scheduler", "worker", "job")}
    assert len(set(images.values())) == 1 and None not in images.values(), images
    for name in ("scheduler", "worker", "job"):
        build = services[name].get("build") or {}
        if build:
            assert build.get("dockerfile") == "deploy/Dockerfile", build
            assert (COMPOSE.parent / build.get("context", ".")).resolve() == ROOT, build


def test_compose_builds_the_image_once_from_a_base_argument():
    """`build` builds one image (not one per service), and its base is the Dockerfile's BASE
    argument, settable where python:3.11-slim cannot be pulled."""
    services = compose()["services"]
    builders = [name for name, svc in services.items() if svc.get("build")]
    assert builders == ["scheduler"], f"services that build: {builders}"
    args = services["scheduler"]["build"].get("args") or {}
    assert re.fullmatch(r"\$\{EVALCORE_BASE:-python:3\.11-slim\}", str(args.get("BASE", ""))), args
    for name in ("worker", "job"):
        assert services[name].get("pull_policy") == "never", f"{name} would try to pull the local image"


def test_compose_down_is_always_written_with_remove_orphans():
    """podman-compose's plain `down` leaves the other replicas of a scaled service, the pod
    and the network: every `down` shown in deploy/ and README.md says --remove-orphans."""
    bad = []
    for path in [*deploy_files(), ROOT / "README.md"]:
        if path.suffix not in {".md", ".yaml", ".sh", ""}:
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if re.search(r"compose\b.*\sdown\b", line) and "--remove-orphans" not in line:
                bad.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not bad, "`down` without --remove-orphans:\n" + "\n".join(bad)


def test_compose_ci_script():
    script = DEPLOY / "compose-ci.sh"
    assert os.access(script, os.X_OK), "deploy/compose-ci.sh must be executable"
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = script.read_text()
    assert "trap teardown EXIT" in text and "down --remove-orphans" in text, "the stack must go on every exit"


def test_compose_scheduler_port_matches_clients():
    services = compose()["services"]
    port = flag_value(tokens(services["scheduler"]["command"]), "--port") or "8786"
    assert tokens(services["worker"]["command"])[2] == f"tcp://scheduler:{port}"
    assert flag_value(tokens(services["job"]["command"]), "--scheduler") == f"tcp://scheduler:{port}"


# --------------------------------------------------------------------------- kubernetes


def _check_cluster_spec(spec: dict, cluster_name: str, where: str):
    """spec is a DaskCluster spec (DaskCluster.spec or DaskJob.spec.cluster.spec)."""
    worker = spec["worker"]
    assert isinstance(worker["replicas"], int) and worker["replicas"] >= 1, where
    wcs = k8s_containers(worker["spec"])
    assert wcs, f"{where}: worker.spec.containers is empty"
    for c in wcs:
        assert container_argv(c)[:2] == ["dask", "worker"], f"{where}: {container_argv(c)}"

    scheduler = spec["scheduler"]
    scs = k8s_containers(scheduler["spec"])
    assert scs, f"{where}: scheduler.spec.containers is empty"
    for c in scs:
        assert container_argv(c)[:2] == ["dask", "scheduler"], f"{where}: {container_argv(c)}"
        port_names = {p.get("name") for p in c.get("ports", [])}
        # the operator finds the scheduler by these port names
        assert {"tcp-comm", "http-dashboard"} <= port_names, f"{where}: {port_names}"

    service = scheduler["service"]
    assert service["selector"]["dask.org/cluster-name"] == cluster_name, (
        f"{where}: service selector must match the cluster name {cluster_name!r}"
    )
    assert service["selector"]["dask.org/component"] == "scheduler", where
    ports = {p["name"]: p for p in service["ports"]}
    assert ports["tcp-comm"]["port"] == 8786, where
    assert "http-dashboard" in ports, where

    for c in wcs + scs:
        res = c.get("resources") or {}
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(res.get(kind) or {}), (
                f"{where}: container {c['name']} needs resources.{kind}.cpu/memory"
            )
    for c in wcs:
        _check_s3_env(c, where)


def _check_s3_env(container: dict, where: str):
    env = env_names(container)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert key in env, f"{where}: {container['name']} lacks {key}"
        ref = (env[key].get("valueFrom") or {}).get("secretKeyRef")
        assert ref and ref.get("name"), f"{where}: {key} must come from a Secret"


DASKJOBS = {DASKJOB: "evaluate", SCORE_DASKJOB: "score"}


@pytest.mark.parametrize("path", DASKJOBS, ids=lambda p: p.name)
def test_daskjob_structure(path):
    dj = one_doc(path, "DaskJob")
    assert dj["apiVersion"] == DASK_API
    name = dj["metadata"]["name"]
    job_pod = dj["spec"]["job"]["spec"]
    assert job_pod.get("restartPolicy") == "Never", (
        "a failed evaluation should fail the DaskJob, not restart against a half-written report"
    )
    containers = k8s_containers(job_pod)
    assert containers, "spec.job.spec.containers is empty"
    _check_cluster_spec(dj["spec"]["cluster"]["spec"], name, path.name)


@pytest.mark.parametrize("path", DASKJOBS, ids=lambda p: p.name)
def test_daskjob_runner_command(path):
    dj = one_doc(path, "DaskJob")
    (c,) = k8s_containers(dj["spec"]["job"]["spec"])
    argv = container_argv(c)
    assert "evalcore" in " ".join(argv)
    assert argv[:2] == ["sh", "-c"], "use sh -c so $DASK_SCHEDULER_ADDRESS is expanded"
    script = shlex.split(argv[2])
    i = script.index("evalcore")
    assert script[i + 1] == DASKJOBS[path], script
    assert flag_value(script, "--scheduler") == "$DASK_SCHEDULER_ADDRESS", script
    assert flag_value(script, "--out"), script
    _check_s3_env(c, f"{path.name} runner")
    for var in re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", argv[2]):
        if var != "DASK_SCHEDULER_ADDRESS":  # injected by the operator
            assert var in env_names(c), f"runner command uses ${var} but the pod does not set it"
    res = c.get("resources") or {}
    assert res.get("requests") and res.get("limits"), "runner needs requests and limits"


def test_score_daskjob_shares_out_and_leaderboard_with_the_workers():
    """`evalcore score` writes the combined dataset next to --out and the
    workers evaluate it; --out/--leaderboard must be local paths (it locks and
    renames). So both must be on a ReadWriteMany claim mounted at the same
    path in the runner and in every worker."""
    dj = one_doc(SCORE_DASKJOB, "DaskJob")
    job_pod = dj["spec"]["job"]["spec"]
    (runner,) = k8s_containers(job_pod)
    script = shlex.split(container_argv(runner)[2])
    worker_pod = dj["spec"]["cluster"]["spec"]["worker"]["spec"]
    pvcs = {
        d["metadata"]["name"]: d for p in (SCORE_DASKJOB, CRONJOB) for d in yaml_docs(p)
        if d.get("kind") == "PersistentVolumeClaim"
    }
    for flag in ("--out", "--leaderboard"):
        value = flag_value(script, flag)
        assert value and "://" not in value, f"{flag} must be a local path: {value}"
        path = Path(value.split("$", 1)[0])  # the fixed prefix before any $VAR
        claims = []
        for pod, container in [(job_pod, runner)] + [(worker_pod, w) for w in k8s_containers(worker_pod)]:
            vol = _mounted_volume(pod, container, path)
            claims.append((vol.get("persistentVolumeClaim") or {}).get("claimName"))
        assert len(set(claims)) == 1 and claims[0], f"{flag} {value}: not one shared claim: {claims}"
        pvc = pvcs.get(claims[0])
        assert pvc, f"PersistentVolumeClaim {claims[0]} not defined"
        assert "ReadWriteMany" in pvc["spec"]["accessModes"], "runner and workers on many nodes need RWX"


def test_daskcluster_structure():
    dc = one_doc(DASKCLUSTER, "DaskCluster")
    assert dc["apiVersion"] == DASK_API
    _check_cluster_spec(dc["spec"], dc["metadata"]["name"], "DaskCluster")


def test_cronjob_policies():
    cj = one_doc(CRONJOB, "CronJob")
    assert cj["apiVersion"] == "batch/v1"
    spec = cj["spec"]
    assert spec["concurrencyPolicy"] == "Forbid"
    assert isinstance(spec["startingDeadlineSeconds"], int) and spec["startingDeadlineSeconds"] > 0
    for key in ("successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        assert isinstance(spec[key], int) and spec[key] >= 1, key
    job = spec["jobTemplate"]["spec"]
    assert isinstance(job["activeDeadlineSeconds"], int) and job["activeDeadlineSeconds"] > 0
    assert isinstance(job["backoffLimit"], int) and job["backoffLimit"] >= 0
    assert len(spec["schedule"].split()) == 5, spec["schedule"]


def test_cronjob_gate_failure_is_not_retried():
    cj = one_doc(CRONJOB, "CronJob")
    job = cj["spec"]["jobTemplate"]["spec"]
    rules = (job.get("podFailurePolicy") or {}).get("rules") or []
    fail_on = [
        r for r in rules
        if r.get("action") == "FailJob"
        and 3 in ((r.get("onExitCodes") or {}).get("values") or [])
        and (r.get("onExitCodes") or {}).get("operator") == "In"
    ]
    assert fail_on, "exit 3 (gate failed) must fail the Job at once via podFailurePolicy"
    # podFailurePolicy is only valid with restartPolicy Never
    assert job["template"]["spec"]["restartPolicy"] == "Never"


def _nightly_pod() -> tuple[dict, dict]:
    cj = one_doc(CRONJOB, "CronJob")
    pod = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (c,) = k8s_containers(pod)
    return pod, c


def _mounted_volume(pod: dict, container: dict, path: Path) -> dict:
    """The pod volume whose mount contains path (the deepest mount wins)."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    best = None
    for m in container.get("volumeMounts", []):
        mp = Path(m["mountPath"])
        if path == mp or mp in path.parents:
            if best is None or len(mp.parts) > len(Path(best["mountPath"]).parts):
                best = m
    assert best, f"{path} is not on any mounted volume"
    return volumes[best["name"]]


def _nightly_toml() -> tuple[Path, str]:
    pod, c = _nightly_pod()
    argv = container_argv(c)
    i = argv.index("evalcore")
    toml_path = Path(argv[i + 2])
    vol = _mounted_volume(pod, c, toml_path)
    assert "configMap" in vol, f"{toml_path} must come from a ConfigMap volume"
    cm_name = vol["configMap"]["name"]
    cms = [
        d for p in (CRONJOB, DASKCLUSTER, DASKJOB) for d in yaml_docs(p)
        if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == cm_name
    ]
    assert len(cms) == 1, f"ConfigMap {cm_name} not defined in deploy/kubernetes"
    data = cms[0]["data"]
    assert toml_path.name in data, f"ConfigMap {cm_name} lacks key {toml_path.name}"
    return toml_path, data[toml_path.name]


def test_cronjob_runs_nightly_against_long_lived_cluster():
    _, c = _nightly_pod()
    argv = container_argv(c)
    i = argv.index("evalcore")
    assert argv[i + 1] == "nightly", argv
    # Without --scheduler evalcore starts a local cluster inside the pod.
    cluster = one_doc(DASKCLUSTER, "DaskCluster")["metadata"]["name"]
    addr = flag_value(argv, "--scheduler") or ""
    assert re.fullmatch(rf"tcp://{re.escape(cluster)}-scheduler(\.[\w.-]+)?:8786", addr), (
        f"nightly must join the DaskCluster's scheduler Service {cluster}-scheduler: {argv}"
    )
    _check_s3_env(c, "nightly CronJob")


def test_nightly_job_file_is_accepted_by_evalcore(tmp_path):
    toml_path, text = _nightly_toml()
    job_file = tmp_path / toml_path.name
    job_file.write_text(text)
    from evalcore.jobs.nightly import (
        load_job,  # the real validator of `evalcore nightly`
    )

    job = load_job(job_file)
    # The history must outlive the pod, or there is never a "previous run"
    # to gate against: a PersistentVolumeClaim, not the container filesystem.
    pod, c = _nightly_pod()
    history = Path(job["history"])
    assert history.is_absolute(), f"history {history} must be an absolute path in the pod"
    vol = _mounted_volume(pod, c, history)
    claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
    assert claim, f"history {history} must be on a PersistentVolumeClaim, not {vol}"
    pvcs = [
        d["metadata"]["name"] for p in (CRONJOB, DASKCLUSTER) for d in yaml_docs(p)
        if d.get("kind") == "PersistentVolumeClaim"
    ]
    assert claim in pvcs, f"PersistentVolumeClaim {claim} is not defined in deploy/kubernetes"


def test_kubernetes_images_are_identical():
    images = set()
    for path in (DASKJOB, SCORE_DASKJOB, DASKCLUSTER, CRONJOB):
        def walk(node):
            if isinstance(node, dict):
                if "image" in node and "name" in node:
                    images.add(node["image"])
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)
        for doc in yaml_docs(path):
            walk(doc)
    assert len(images) == 1, (
        f"driver, scheduler and workers must run one image (same dask/distributed): {images}"
    )
    (image,) = images
    assert not image.endswith(":latest") and ":" in image.rsplit("/", 1)[-1], (
        f"pin an image tag, not {image!r}"
    )


# --------------------------------------------------------------------------- image


def test_requirements_are_all_pinned_and_complete():
    pins = requirement_pins()
    missing = EXPECTED_PINS - set(pins)
    assert not missing, f"requirements.txt lacks pins for {sorted(missing)}"


@pytest.mark.parametrize("name", ["dask", "distributed"])
def test_test_environment_runs_the_image_versions(name):
    """Client, scheduler and workers must agree on dask/distributed; the other pins only
    need to satisfy pyproject (checked below), so a new numpy release does not fail CI."""
    pins = requirement_pins()
    try:
        installed = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(f"{name} is pinned for the image but not installed in the test environment")
    assert installed == pins[name], (
        f"{name}: deploy/requirements.txt pins {pins[name]} but the tests run {installed}. "
        "The image and the tests must run the same versions: update the pin or the environment."
    )


def test_dask_and_distributed_imported_match_pins():
    import dask
    import distributed

    pins = requirement_pins()
    got = {"dask": dask.__version__, "distributed": distributed.__version__}
    for name, version in got.items():
        assert version == pins[name] == importlib.metadata.version(name), (
            f"{name}: imported {version}, installed {importlib.metadata.version(name)}, "
            f"pinned {pins[name]} -- image and tests must run the same versions"
        )


def test_requirements_cover_pyproject_dependencies():
    """The image installs evalcore with --no-deps: every runtime dependency must
    be pinned in requirements.txt, at a version pyproject.toml accepts."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project.get("dependencies", [])]
    reqs += [Requirement(r) for r in project.get("optional-dependencies", {}).get("s3", [])]
    pins = requirement_pins()
    for req in reqs:
        name = req.name.lower()
        assert name in pins, f"pyproject dependency {req} is not pinned in deploy/requirements.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"pin {name}=={pins[name]} does not satisfy pyproject's {req}"
        )


def _dockerfile_instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile():
    instr = _dockerfile_instructions()
    froms = [rest for word, rest in instr if word == "FROM"]
    # The base is a build argument (a local stand-in can replace it), whose
    # default is the public image users pull.
    args = dict(
        rest.split("=", 1) for word, rest in instr[:instr.index(("FROM", froms[0]))]
        if word == "ARG" and "=" in rest
    )
    base = froms[0].split()[0]
    if base.startswith("${") and base.endswith("}"):
        base = args.get(base[2:-1])
    assert base == "python:3.11-slim", froms
    assert not [w for w, _ in instr if w == "ENTRYPOINT"], "no ENTRYPOINT: the command picks the role"

    runs = [rest for word, rest in instr if word == "RUN"]
    pip_cmds = [
        seg.strip() for r in runs for seg in re.split(r"&&|;", r) if re.search(r"\bpip install\b", seg)
    ]
    req = [i for i, c in enumerate(pip_cmds) if "-r deploy/requirements.txt" in c]
    own = [i for i, c in enumerate(pip_cmds) if "--no-deps" in c and re.search(r"""["']?\.\[s3\]["']?""", c)]
    assert req and own and req[0] < own[0], f"expected pinned install, then --no-deps .[s3]: {pip_cmds}"
    for c in pip_cmds:
        assert "--no-cache-dir" in c, c
        assert "-r deploy/requirements.txt" in c or "--no-deps" in c, (
            f"every pip install must be pinned (requirements) or --no-deps: {c}"
        )
    copies = [rest for word, rest in instr if word == "COPY"]
    assert any("deploy/requirements.txt" in c for c in copies), copies

    users = [rest for word, rest in instr if word == "USER"]
    assert users, "the image must switch to a non-root user"
    final = users[-1].split(":")[0]
    assert final not in {"root", "0"}, f"final USER is {final}"
    # USER must come after the installs
    last_user = max(i for i, (w, _) in enumerate(instr) if w == "USER")
    last_pip = max(i for i, (w, r) in enumerate(instr) if w == "RUN" and "pip install" in r)
    assert last_user > last_pip


def test_build_context_excludes_venv_and_git_but_keeps_the_package():
    import fnmatch

    ignore = DEPLOY / "Dockerfile.dockerignore"  # BuildKit: <Dockerfile>.dockerignore
    patterns = [
        line.strip() for line in ignore.read_text().splitlines() if line.strip() and not line.startswith("#")
    ]

    def ignored(path: str) -> bool:
        return any(fnmatch.fnmatch(path, p) or fnmatch.fnmatch(path, p.removeprefix("**/"))
                   for p in patterns)

    for path in (".git", ".venv"):
        assert ignored(path), f"{path} must not be sent to the build"
    for path in ("pyproject.toml", "evalcore", "jobs", "deploy", "deploy/requirements.txt", "README.md"):
        assert not ignored(path), f"{path} is needed by the image build"


# --------------------------------------------------------------------------- slurm


def test_sbatch_syntax():
    proc = subprocess.run(["bash", "-n", str(SBATCH)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_sbatch_directives_and_commands():
    text = SBATCH.read_text()
    assert text.startswith("#!/bin/bash"), "sbatch needs a bash shebang"
    assert re.search(r"^set -euo pipefail$", text, re.M)
    directives = dict(
        re.findall(r"^#SBATCH\s+--([\w-]+)(?:=(\S+))?", text, re.M)
    )
    for key in ("nodes", "ntasks", "cpus-per-task", "mem", "time"):
        assert directives.get(key), f"#SBATCH --{key} missing"
    # the defaults run on one node; more nodes are asked for on the command line
    assert directives["nodes"] == "1", directives
    assert "ntasks-per-node" not in directives, "a per-node count fixed in the script fights --nodes=N"
    # Directives are only read before the first command.
    first_cmd = next(
        i for i, line in enumerate(text.splitlines()[1:], 1) if line.strip() and not line.startswith("#")
    )
    last_directive = max(
        i for i, line in enumerate(text.splitlines()) if line.startswith("#SBATCH")
    )
    assert last_directive < first_cmd, "#SBATCH lines after the first command are ignored"
    assert "srun" in text
    assert re.search(r"dask scheduler --scheduler-file", text)
    assert re.search(r"dask worker --scheduler-file", text)
    assert re.search(r'evalcore evaluate .*--scheduler "\$', text)


def _write_exe(path: Path, body: str):
    path.write_text(body)
    path.chmod(0o755)


FAKE_SRUN = r'''#!{python}
# Minimal stand-in for `srun --multi-prog FILE`: starts every task locally.
import json, os, shlex, signal, subprocess, sys

args = sys.argv[1:]
with open(os.environ["FAKE_SRUN_LOG"], "a") as f:
    f.write(json.dumps(args) + "\n")
if "--multi-prog" not in args:
    sys.exit("fake srun supports only --multi-prog")
conf = args[args.index("--multi-prog") + 1]
ntasks = int(next(a.split("=", 1)[1] for a in args if a.startswith("--ntasks=")))
table = {{}}
for line in open(conf):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    ranks, cmd = line.split(None, 1)
    for part in ranks.split(","):
        lo, _, hi = part.partition("-")
        for rank in range(int(lo), int(hi or lo) + 1):
            if rank in table:
                sys.exit(f"task {{rank}} specified twice")
            table[rank] = shlex.split(cmd.replace("%t", str(rank)))
if sorted(table) != list(range(ntasks)):
    sys.exit(f"multi-prog ranks {{sorted(table)}} do not cover 0..{{ntasks - 1}} exactly")
procs = [
    subprocess.Popen(table[r], env={{**os.environ, "SLURM_PROCID": str(r)}})
    for r in range(ntasks)
]
def stop(*_):
    for p in procs:
        p.terminate()
signal.signal(signal.SIGTERM, stop)
sys.exit(max(p.wait() for p in procs))
'''

FAKE_EVALCORE = r'''#!{python}
# Stand-in driver: records its argv, what the cluster looks like, and where the
# Dask processes of this job (their command line names the scheduler file) listen.
import json, os, sys
import psutil
from distributed import Client

argv = sys.argv[1:]
addr = argv[argv.index("--scheduler") + 1]
with Client(addr, timeout="20s") as c:
    workers = c.scheduler_info(n_workers=-1)["workers"].values()
    info = {{
        "argv": argv,
        "nthreads": sorted(w["nthreads"] for w in workers),
        "memory_limit": sorted(w["memory_limit"] for w in workers),
    }}
# dask scheduler/worker processes started for this job (their command line names its
# scheduler file), with their children (a worker's nanny runs the worker in a child)
mine = os.path.join(os.environ["SLURM_SUBMIT_DIR"], ".evalcore", "scheduler-" + os.environ["SLURM_JOB_ID"] + ".json")
listening = set()
for p in psutil.process_iter(["cmdline"]):
    if not any(mine in a for a in p.info["cmdline"] or []):
        continue
    try:
        for q in [p, *p.children(recursive=True)]:
            listening |= {{c.laddr.ip for c in q.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}}
    except psutil.Error:
        continue
info["listening"] = sorted(listening)
with open(os.environ["FAKE_EVALCORE_LOG"], "w") as f:
    json.dump(info, f)
sys.exit(int(os.environ.get("FAKE_EVALCORE_RC", "0")))
'''


def _port_open(addr: str) -> bool:
    host, port = addr.removeprefix("tcp://").rsplit(":", 1)
    assert host == "127.0.0.1", host  # only ever probe loopback
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, int(port))) == 0


@pytest.mark.cluster
def _fake_slurm_env(tmp_path: Path) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _write_exe(bindir / "srun", FAKE_SRUN.format(python=sys.executable))
    _write_exe(bindir / "evalcore", FAKE_EVALCORE.format(python=sys.executable))
    venv_bin = Path(sys.executable).parent
    (tmp_path / "local").mkdir()
    return {
        "PATH": f"{bindir}:{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "SLURM_JOB_ID": "4242",
        "SLURM_NTASKS": "3",
        "SLURM_CPUS_PER_TASK": "1",
        "SLURM_SUBMIT_DIR": str(tmp_path),
        "PYTHON": sys.executable,
        # no DASK_INTERFACE: on one node the script keeps Dask on loopback by itself
        "WORKER_MEMORY_LIMIT": "1GiB",
        "EVALCORE_LOCAL_DIR": str(tmp_path / "local"),
        "CLUSTER_START_TIMEOUT": "90",
        "FAKE_SRUN_LOG": str(tmp_path / "srun.log"),
        "FAKE_EVALCORE_LOG": str(tmp_path / "evalcore.json"),
        "FAKE_EVALCORE_RC": "3",
    }


@pytest.mark.cluster
def test_sbatch_runs_cluster_and_driver_with_fake_srun(tmp_path):
    """Run the real sbatch script with a fake srun: scheduler + 2 workers start
    on loopback (and listen nowhere else), the driver gets the scheduler address,
    its exit status (3 here) becomes the job's, the cluster and its files are
    cleaned up, and the shutdown logs no traceback."""
    env = _fake_slurm_env(tmp_path)
    proc = subprocess.Popen(
        ["bash", str(SBATCH), "ds.zarr", "s3://bucket/report", "--protocol", "reid"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    tail = textwrap.indent(out[-4000:], "  ")
    assert proc.returncode == 3, f"exit {proc.returncode}, expected the driver's 3:\n{tail}"

    info = json.loads((tmp_path / "evalcore.json").read_text())
    argv = info["argv"]
    addr = flag_value(argv, "--scheduler")
    assert argv[:4] == ["evaluate", "ds.zarr", "--out", "s3://bucket/report"], argv
    assert argv[-2:] == ["--protocol", "reid"], argv
    assert addr and addr.startswith("tcp://127.0.0.1:"), addr
    assert info["nthreads"] == [1, 1], info
    assert info["memory_limit"] == [2**30, 2**30], info
    # scheduler, dashboards, nannies and workers: 127.0.0.1 only (a scheduler runs any code sent to it)
    assert info["listening"] == ["127.0.0.1"], info["listening"]
    assert "Traceback" not in out and " ERROR " not in out, f"noise in the job's log:\n{tail}"

    srun_calls = [json.loads(line) for line in (tmp_path / "srun.log").read_text().splitlines()]
    assert len(srun_calls) == 1 and "--multi-prog" in srun_calls[0], srun_calls
    shared = tmp_path / ".evalcore"
    assert not list(shared.glob("*4242*")), f"left behind: {list(shared.iterdir())}"
    assert not _port_open(addr), f"scheduler still listening at {addr} after the job ended"


def test_sbatch_on_several_nodes_needs_an_interface(tmp_path):
    """A multi-node job cannot keep Dask on loopback: without DASK_INTERFACE it stops at
    once (exit 2, before starting anything) instead of listening on every interface."""
    env = {**_fake_slurm_env(tmp_path), "SLURM_JOB_NUM_NODES": "2"}
    proc = subprocess.run(["bash", str(SBATCH), "ds.zarr", "out"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "DASK_INTERFACE" in proc.stderr, proc.stderr
    assert not (tmp_path / "srun.log").exists(), "started the cluster anyway"
