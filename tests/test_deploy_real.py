"""The deployment targets under deploy/, run for real (issue 12).

Marked ``deploy``. Run them all with ``deploy/test-here.sh`` (installs podman,
podman-compose, debootstrap, Slurm and munge from Debian, makes the local base
image, then runs ``pytest -m deploy``). Each part skips with the reason when
what it needs is missing, so the plain CI (``pytest``) stays green and fast:

- image: ``podman build`` of deploy/Dockerfile on a local base image, then
  ``evalcore demo`` inside the container, compared with a demo run outside it;
- compose: deploy/README.md's compose recipe, its CI command (deploy/compose-ci.sh)
  and its one-container command, read out of the README and run as written
  (podman/podman-compose behind ``docker``, as an ordinary uid): one build,
  reports compared with a local ``evalcore evaluate`` of the same dataset, the
  scheduler bound to loopback only, the job's exit status, nothing left after
  ``down``;
- Slurm: deploy/slurm/evalcore.sbatch submitted with ``sbatch`` and its own
  defaults to a private single-node Slurm (deploy/slurm/single-node.sh): one
  node, Dask on loopback only, no traceback in the log, report compared with the
  local run; a cancelled job leaves no report and no processes;
- Kubernetes: every manifest validated offline against the Kubernetes JSON
  schemas (kubernetes-validate) and the Dask operator's CRDs (from the
  dask-kubernetes wheel). Nothing is applied: no API server runs here.

Reports are compared value by value (pyarrow), never against fixed numbers.
"""
from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

pytestmark = pytest.mark.deploy

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
COMPOSE_FILE = DEPLOY / "compose.yaml"
SBATCH = DEPLOY / "slurm" / "evalcore.sbatch"
SINGLE_NODE = DEPLOY / "slurm" / "single-node.sh"
K8S_DIR = DEPLOY / "kubernetes"

# Where deploy/test-here.sh keeps what it makes (base rootfs, CRDs); override with EVALCORE_DEPLOY_STATE.
STATE = Path(os.environ.get("EVALCORE_DEPLOY_STATE", "/var/tmp/evalcore-deploy"))
BASE_IMAGE = os.environ.get("EVALCORE_BASE_IMAGE", "localhost/evalcore-base:bookworm")
IMAGE = os.environ.get("EVALCORE_TEST_IMAGE", "localhost/evalcore:deploy-test")
CONTAINERS_CONF = Path(os.environ.get("CONTAINERS_CONF", DEPLOY / "podman" / "containers.conf"))
CRD_DIR = Path(os.environ.get("EVALCORE_DASK_CRDS", STATE / "dask-crds"))
# Kubernetes versions the manifests must validate against. podFailurePolicy is
# in batch/v1 since 1.26, but the published schemas up to 1.28 still require
# onPodConditions in every rule (optional from 1.29), so 1.29 is the oldest
# version checked.
K8S_VERSIONS = ("1.29", "1.31", "latest")

VENV_BIN = Path(sys.executable).parent
EVALCORE = VENV_BIN / "evalcore"
HERE = "run deploy/test-here.sh, which installs and prepares it"


# --------------------------------------------------------------------------- helpers


def run(cmd, *, timeout=600, check=True, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} exited {proc.returncode}\n"
            f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
        )
    return proc


def read_table(path: Path):
    return pq.read_table(path)


def assert_reports_equal(got: Path, want: Path):
    """Same Parquet files, same schemas, same values (floats to 1e-12 relative)."""
    assert (got / "manifest.json").is_file(), f"{got} has no manifest.json: incomplete report"
    got_files = sorted(p.name for p in got.glob("*.parquet"))
    want_files = sorted(p.name for p in want.glob("*.parquet"))
    assert got_files == want_files, f"{got}: {got_files} != {want}: {want_files}"
    assert "summary.parquet" in got_files and "per_query.parquet" in got_files, got_files
    for name in got_files:
        a, b = read_table(got / name), read_table(want / name)
        assert a.schema.names == b.schema.names, f"{name}: columns {a.schema.names} != {b.schema.names}"
        assert a.num_rows == b.num_rows and a.num_rows > 0, f"{name}: {a.num_rows} != {b.num_rows} rows"
        for col in a.schema.names:
            x, y = a[col].to_pylist(), b[col].to_pylist()
            if a[col].type != b[col].type:
                raise AssertionError(f"{name}.{col}: type {a[col].type} != {b[col].type}")
            try:
                xf = np.asarray(x, dtype=float)
                yf = np.asarray(y, dtype=float)
            except (TypeError, ValueError):
                assert x == y, f"{name}.{col} differs"
                continue
            np.testing.assert_allclose(xf, yf, rtol=1e-12, atol=0, equal_nan=True, err_msg=f"{name}.{col}")


def write_dataset(path: Path, n_query: int, n_gallery: int, dims: int, seed: int = 0):
    from evalcore.jobs import synthetic

    # Several query chunks and gallery blocks, distractors, junk and unknown
    # queries: the distributed paths all get exercised.
    synthetic.write_clustered(path, synthetic.Clusters(n_query=n_query, n_gallery=n_gallery, dims=dims,
                                                   n_ids=max(20, n_query // 4), distractors=0.14, junk=0.02,
                                                   unknown=0.02, separation=2.0),
                              seed=seed, query_chunk=256, gallery_chunk=2048)


def local_evaluate(dataset: Path, out: Path):
    run([EVALCORE, "evaluate", dataset, "--out", out, "--workers", "2", "--quiet"], cwd=out.parent)


def open_for_container_user(path: Path):
    """The image runs as uid 10001: let it read and write a bind-mounted test folder."""
    for p in [path, *path.rglob("*")]:
        p.chmod(0o777 if p.is_dir() else 0o666)


_CONTAINERS_CONF_WITH_ENV: list[Path] = []


def containers_conf() -> Path:
    """deploy/podman/containers.conf, plus the host's OPENBLAS_* settings for every container.

    OpenBLAS picks its float32 kernels by CPU unless OPENBLAS_CORETYPE says otherwise, and
    this project's machines set OPENBLAS_CORETYPE=Haswell on an AVX-512 CPU. A container
    without it picks SkylakeX and its float32 scores differ in the last bits (84 of the
    demo's 3,368 rank-1 scores, by up to 8e-7 relative), so the reports would not be equal
    to the local run's. Passing the setting in compares the same arithmetic."""
    blas = {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS_")}
    if not blas:
        return CONTAINERS_CONF
    if not _CONTAINERS_CONF_WITH_ENV:
        text = CONTAINERS_CONF.read_text()
        assert "\n[containers]\n" in text and "\nenv" not in text, CONTAINERS_CONF
        line = "env = [" + ", ".join(json.dumps(f"{k}={v}") for k, v in sorted(blas.items())) + "]"
        folder = tempfile.mkdtemp(prefix="evalcore-deploy-")
        atexit.register(shutil.rmtree, folder, True)
        path = Path(folder) / "containers.conf"
        path.write_text(text.replace("\n[containers]\n", f"\n[containers]\n{line}\n", 1))
        _CONTAINERS_CONF_WITH_ENV.append(path)
    return _CONTAINERS_CONF_WITH_ENV[0]


def podman_env(**extra) -> dict:
    return {**os.environ, "CONTAINERS_CONF": str(containers_conf()), **extra}


def podman(*args, **kw):
    return run(["podman", *args], env=podman_env(), **kw)


def loopback_listeners(port: int) -> dict[str, bool]:
    """Which local addresses accept TCP connections on port: loopback and every other host address."""
    addrs = {"127.0.0.1"}
    out = run(["ip", "-4", "-o", "addr", "show"], check=False).stdout
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            addrs.add(parts[parts.index("inet") + 1].split("/")[0])
    result = {}
    for addr in sorted(addrs):
        with socket.socket() as s:
            s.settimeout(2)
            result[addr] = s.connect_ex((addr, port)) == 0
    return result


# --------------------------------------------------------------------------- shared fixtures


def need_heavy(request):
    """Building the image and running compose/Slurm takes minutes of both cores: only
    with `pytest -m deploy` or EVALCORE_DEPLOY_TESTS=1 (deploy/test-here.sh sets it),
    even where podman and Slurm are installed, so a plain `pytest` stays fast."""
    asked = "deploy" in (request.config.getoption("markexpr") or "")
    if not asked and os.environ.get("EVALCORE_DEPLOY_TESTS") != "1":
        pytest.skip("builds/runs containers or Slurm jobs: run deploy/test-here.sh (or pytest -m deploy)")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("deploy-data") / "ds.zarr"
    write_dataset(path, n_query=800, n_gallery=6000, dims=64)
    return path


@pytest.fixture(scope="module")
def local_report(dataset, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("deploy-local") / "report"
    local_evaluate(dataset, out)
    return out


# --------------------------------------------------------------------------- image


def need_podman():
    if not shutil.which("podman"):
        pytest.skip(f"podman is not installed: {HERE}")
    if podman("image", "exists", BASE_IMAGE, check=False).returncode != 0:
        pytest.skip(f"no base image {BASE_IMAGE} in podman: {HERE}")


@pytest.fixture(scope="module")
def image(request) -> str:
    need_heavy(request)
    need_podman()
    started = time.monotonic()
    before = podman("image", "inspect", "--format", "{{.Id}}", IMAGE, check=False).stdout.strip()
    podman("build", "--network", "host", "--build-arg", f"BASE={BASE_IMAGE}",
           "--ignorefile", DEPLOY / "Dockerfile.dockerignore",
           "-f", DEPLOY / "Dockerfile", "-t", IMAGE, ROOT, timeout=1800)
    print(f"image {IMAGE} built in {time.monotonic() - started:.0f} s")
    after = podman("image", "inspect", "--format", "{{.Id}}", IMAGE).stdout.strip()
    if before and before != after:  # the previous build of this tag, now untagged: remove it (only it)
        podman("rmi", before, check=False)
    return IMAGE


def test_image_runs_as_non_root_with_the_pinned_stack(image):
    from test_deploy import requirement_pins

    names = sorted(requirement_pins())
    probe = ("import importlib.metadata as m, json, os; "
             f"print(json.dumps({{'uid': os.getuid(), **{{n: m.version(n) for n in {names!r}}}}}))")
    got = json.loads(podman("run", "--rm", "--network", "none", image, "python", "-c", probe).stdout)
    assert got.pop("uid") == 10001
    assert got == requirement_pins(), "the image must carry exactly deploy/requirements.txt"
    assert "evaluate" in podman("run", "--rm", "--network", "none", image, "evalcore", "--help").stdout


@pytest.mark.parametrize("user", [None, "4242:4242"], ids=["image-user", "any-uid"])
def test_the_kernel_is_compiled_into_the_image_not_at_start(image, user):
    # numba writes an index (.nbi) and one object file (.nbc) per compiled signature; a container that
    # finds them loads the kernel instead of compiling it, and must not write anything new. Under any
    # other uid too (`docker run -u`, compose's EVALCORE_UID): numba refuses to import a cached function
    # from a folder it cannot write, so the image once failed there with "no locator available".
    probe = ("import os, glob; from evalcore.core import kernels; d = os.environ['NUMBA_CACHE_DIR']; "
             "before = sorted(glob.glob(d + '/**/*.nb*', recursive=True)); kernels.warm_up(); "
             "after = sorted(glob.glob(d + '/**/*.nb*', recursive=True)); "
             "print(len(before), before == after, os.access(d, os.W_OK))")
    as_user = ["-u", user] if user else []
    out = podman("run", "--rm", "--network", "none", *as_user, image, "python", "-c", probe).stdout.split()
    assert int(out[0]) >= 2 and out[1:] == ["True", "True"], out


def test_demo_in_the_image_equals_a_local_demo(image, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    open_for_container_user(shared)
    podman("run", "--rm", "--network", "none", "-v", f"{shared}:/out",
           image, "evalcore", "demo", "--out", "/out/demo", "--workers", "2", timeout=900)
    local = tmp_path / "local"
    local.mkdir()
    run([EVALCORE, "demo", "--out", local / "demo", "--workers", "2"], cwd=local, timeout=900)
    assert_reports_equal(shared / "demo" / "report", local / "demo" / "report")


# --------------------------------------------------------------------------- compose


def compose_cmd() -> list[str]:
    """podman-compose >= 1.1 (deploy/test-here.sh puts 1.6.0 in its tools venv). Debian 12's
    1.0.3 ignores `--scale`, so the stack would silently run one worker."""
    exe = os.environ.get("EVALCORE_COMPOSE")  # e.g. "podman-compose"
    if exe:
        return exe.split()
    tools = STATE / "tools" / "bin" / "podman-compose"
    if tools.exists():
        return [str(tools)]
    pytest.skip(f"no podman-compose >= 1.1 (set EVALCORE_COMPOSE): {HERE}")


# README's commands are run as written, through two shell functions: `docker compose` is
# podman-compose, `docker` is podman (with the test image for `evalcore:local`), and
# `id -u`/`id -g` answer for an ordinary user, uid/gid 4242 (the tests run as root, and a
# recipe that works for root proves nothing about "the containers write /data as you").
USER_ID = 4242
SHIMS = r'''
docker() {
    if [[ "$1" == compose ]]; then shift; $EVALCORE_TEST_COMPOSE "$@"; return; fi
    local args=() a
    for a in "$@"; do [[ "$a" == evalcore:local ]] && a=$EVALCORE_TEST_IMAGE; args+=("$a"); done
    podman "${args[@]}"
}
id() {
    case "$1" in -u) echo "$EVALCORE_TEST_UID" ;; -g) echo "$EVALCORE_TEST_UID" ;; *) command id "$@" ;; esac
}
set -e
'''


def readme_commands(heading: str, block: int = 0) -> list[str]:
    """The shell commands of the block-th ```bash block of deploy/README.md under `heading`
    (before the next heading), continuation lines joined, comment lines dropped."""
    lines = (DEPLOY / "README.md").read_text().splitlines()
    blocks: list[list[str]] = []
    in_block = False
    for line in lines[lines.index(heading) + 1:]:
        if line.startswith("```"):
            in_block = not in_block
            if in_block:
                blocks.append([] if line.strip() == "```bash" else ["(not bash)"])
            continue
        if not in_block and line.startswith("#"):
            break  # the next heading
        if not in_block or not line.strip() or line.lstrip().startswith("#"):
            continue
        commands = blocks[-1]
        if commands and commands[-1].endswith("\\"):
            commands[-1] = commands[-1][:-1].rstrip() + " " + line.strip()
        else:
            commands.append(line.strip())
    assert len(blocks) > block, f"no bash block {block} under {heading!r} in deploy/README.md"
    return blocks[block]


def the_command(commands: list[str], *words: str) -> str:
    found = [c for c in commands if all(w in c for w in words)]
    assert len(found) == 1, f"expected one command with {words} in deploy/README.md, found {found}"
    return found[0]


def run_as_written(command: str, env: dict, *, cwd: Path, timeout: int = 900,
                   check: bool = True) -> subprocess.CompletedProcess:
    return run(["bash", "-c", SHIMS + command], env=env, cwd=cwd, timeout=timeout, check=check)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def owned_data_dir(path: Path, dataset: Path) -> Path:
    """A /data folder as a user has it: theirs (uid 4242), not writable by anyone else."""
    path.mkdir(parents=True)
    shutil.copytree(dataset, path / "ds.zarr")
    for p in [path, *path.rglob("*")]:
        os.chown(p, USER_ID, USER_ID)
    path.chmod(0o755)
    return path


def compose_env(image: str, data: Path, project: str) -> dict:
    return podman_env(
        EVALCORE_TEST_COMPOSE=" ".join(compose_cmd()), EVALCORE_TEST_IMAGE=image, EVALCORE_TEST_UID=str(USER_ID),
        EVALCORE_IMAGE=image, EVALCORE_BASE=BASE_IMAGE, EVALCORE_DATA=str(data), COMPOSE_PROJECT_NAME=project,
        EVALCORE_SCHEDULER_PORT=str(free_port()), EVALCORE_DASHBOARD_PORT=str(free_port()),
    )


def project_leftovers(project: str, env: dict) -> dict[str, list[str]]:
    """Everything podman still has of a compose project: containers, pods, networks, volumes."""
    label = f"label=io.podman.compose.project={project}"
    return {
        "containers": run(["podman", "ps", "-a", "--format", "{{.Names}} {{.Status}}", "--filter", label],
                          env=env).stdout.splitlines(),
        "pods": [p for p in run(["podman", "pod", "ps", "--format", "{{.Name}}"], env=env).stdout.split()
                 if project in p],
        "networks": [n for n in run(["podman", "network", "ls", "--format", "{{.Name}}"], env=env).stdout.split()
                     if n.startswith(project)],
        "volumes": run(["podman", "volume", "ls", "--format", "{{.Name}}", "--filter", label],
                       env=env).stdout.split(),
    }


def assert_nothing_left(project: str, env: dict, how: str):
    left = {k: v for k, v in project_leftovers(project, env).items() if v}
    assert not left, f"{how} left {left}"
    for port in (env["EVALCORE_SCHEDULER_PORT"], env["EVALCORE_DASHBOARD_PORT"]):
        assert not loopback_listeners(int(port))["127.0.0.1"], f"port {port} still open after {how}"


def force_down(project: str, env: dict):
    """After a failed test: remove what the recipe left, so the next test starts clean."""
    for name in run(["podman", "ps", "-a", "--format", "{{.Names}}", "--filter",
                     f"label=io.podman.compose.project={project}"], env=env, check=False).stdout.split():
        run(["podman", "rm", "-f", name], env=env, check=False)
    for pod in project_leftovers(project, env)["pods"]:
        run(["podman", "pod", "rm", "-f", pod], env=env, check=False)
    for net in project_leftovers(project, env)["networks"]:
        run(["podman", "network", "rm", "-f", net], env=env, check=False)


def test_compose_recipe_as_written(image, dataset, local_report, tmp_path):
    """deploy/README.md's compose recipe, line by line: `build` builds the one image once, on
    the BASE given; 4 workers join; the scheduler answers on 127.0.0.1 only; the job, run as
    an ordinary user, writes a report equal to a local run into that user's folder; and
    `down` as written leaves no container, pod, network, volume or open port."""
    commands = readme_commands("## Shared box or CI: Docker Compose")
    export = the_command(commands, "export EVALCORE_UID=")
    build = the_command(commands, "compose", " build")
    up = the_command(commands, "compose", " up -d", "--scale worker=", "scheduler worker")
    (job,) = [c for c in commands if c.endswith("compose.yaml run --rm job")]  # the job as compose.yaml has it
    down = the_command(commands, "compose", " down")
    n_workers = int(up.split("--scale worker=")[1].split()[0])

    data = owned_data_dir(tmp_path / "data", dataset)
    project = f"evalcore-test-{uuid.uuid4().hex[:8]}"
    env = compose_env(image, data, project)
    port, dash = int(env["EVALCORE_SCHEDULER_PORT"]), int(env["EVALCORE_DASHBOARD_PORT"])
    try:
        built = run_as_written(f"{export}\n{build}", env, cwd=ROOT, timeout=1800)
        log = built.stdout + built.stderr
        assert log.count("STEP 1/") == 1, f"`build` built {log.count('STEP 1/')} images, not one:\n{log[-3000:]}"
        assert f"FROM {BASE_IMAGE}" in log, f"BASE={BASE_IMAGE} was not used:\n{log[-3000:]}"

        run_as_written(f"{export}\n{up}", env, cwd=ROOT, timeout=300)
        from distributed import Client

        deadline = time.monotonic() + 120
        while not loopback_listeners(port)["127.0.0.1"]:
            assert time.monotonic() < deadline, f"scheduler never listened on 127.0.0.1:{port}"
            time.sleep(1)
        with Client(f"tcp://127.0.0.1:{port}", timeout="30s") as client:
            client.wait_for_workers(n_workers, timeout=180)
            joined = len(client.scheduler_info(n_workers=-1)["workers"])
        assert joined == n_workers, f"{joined} workers joined, expected {n_workers}"
        for p in (port, dash):
            listening = loopback_listeners(p)
            exposed = [a for a, up_ in listening.items() if up_ and a != "127.0.0.1"]
            assert listening["127.0.0.1"] and not exposed, f"port {p}: {listening} (compose binds it to 127.0.0.1)"

        ran = run_as_written(f"{export}\n{job}", env, cwd=ROOT, check=False)
        assert ran.returncode == 0, f"job exited {ran.returncode}\n{ran.stdout[-3000:]}\n{ran.stderr[-3000:]}"
        assert_reports_equal(data / "report", local_report)
        assert (data / "report").stat().st_uid == USER_ID, "the report is not the user's"
    finally:
        downed = run_as_written(f"{export}\n{down}", env, cwd=ROOT, timeout=300, check=False)
        left = project_leftovers(project, env)
        if any(left.values()):
            force_down(project, env)
    assert downed.returncode == 0, downed.stderr[-3000:]
    assert not any(left.values()), f"`{down}` left {left}"
    assert_nothing_left(project, env, f"`{down}`")


def test_compose_ci_command_returns_the_jobs_status_and_removes_the_stack(image, dataset, local_report, tmp_path):
    """README's CI command: exit 0 and a report equal to a local run when the job succeeds,
    the job's own exit status (2: no such dataset) when it fails; nothing left either way."""
    (ci,) = readme_commands("## Shared box or CI: Docker Compose", block=1)
    assert ci.startswith("deploy/compose-ci.sh"), ci
    for case, extra, want in (("passes", "", 0),
                              ("fails", " evalcore evaluate /data/missing.zarr --out /data/r"
                                        " --scheduler tcp://scheduler:8786", 2)):
        data = owned_data_dir(tmp_path / case, dataset)
        project = f"evalcore-test-{uuid.uuid4().hex[:8]}"
        env = compose_env(image, data, project)
        env.update(EVALCORE_COMPOSE=env["EVALCORE_TEST_COMPOSE"], EVALCORE_UID=str(USER_ID),
                   EVALCORE_GID=str(USER_ID))
        try:
            proc = run_as_written(ci + extra, env, cwd=ROOT, timeout=1200, check=False)
        finally:
            left = project_leftovers(project, env)
            if any(left.values()):
                force_down(project, env)
        out = f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        assert proc.returncode == want, f"job {case}: `{ci}{extra}` exited {proc.returncode}, not {want}\n{out}"
        assert not any(left.values()), f"job {case}: `{ci}` left {left}\n{out}"
        assert_nothing_left(project, env, f"`{ci}` (job {case})")
        if want == 0:
            assert_reports_equal(data / "report", local_report)
        else:
            assert "no Zarr group found" in proc.stdout + proc.stderr, out


def test_single_container_recipe_as_written(image, dataset, local_report, tmp_path):
    """README's one-container command, as an ordinary user whose folder is not writable by the
    image's uid 10001: `-u $(id -u):$(id -g)` gives a report equal to a local run, owned by
    the user; without `-u`, evalcore stops at once and says why (exit 2)."""
    (cmd,) = readme_commands("### One container, no compose")
    assert '-u "$(id -u):$(id -g)"' in cmd, cmd
    box = tmp_path / "box"  # stands in for the repository root: the command mounts $PWD/deploy/data
    data = owned_data_dir(box / "deploy" / "data", dataset)
    env = podman_env(EVALCORE_TEST_IMAGE=image, EVALCORE_TEST_UID=str(USER_ID), EVALCORE_TEST_COMPOSE="false")
    ran = run_as_written(cmd, env, cwd=box, check=False)
    assert ran.returncode == 0, f"exit {ran.returncode}\n{ran.stdout[-3000:]}\n{ran.stderr[-3000:]}"
    assert_reports_equal(data / "report", local_report)
    assert (data / "report").stat().st_uid == USER_ID

    as_image_user = cmd.replace('-u "$(id -u):$(id -g)" ', "").replace("/data/report", "/data/report2")
    ran = run_as_written(as_image_user, env, cwd=box, check=False)
    assert ran.returncode == 2 and "cannot write in /data" in ran.stderr, (ran.returncode, ran.stderr[-2000:])
    assert not (data / "report2").exists()


# --------------------------------------------------------------------------- Slurm


@pytest.fixture(scope="module")
def slurm(request, tmp_path_factory):
    need_heavy(request)
    for exe in ("slurmctld", "slurmd", "munged", "sbatch"):
        if not shutil.which(exe):
            pytest.skip(f"{exe} is not installed (Slurm/munge): {HERE}")
    if os.geteuid() != 0:
        pytest.skip("a private single-node Slurm needs root (slurmd runs jobs as their user)")
    state = tmp_path_factory.mktemp("slurm")
    try:
        run([SINGLE_NODE, "start", state], timeout=120)
        yield {**os.environ, "SLURM_CONF": str(state / "slurm.conf")}
    finally:
        run([SINGLE_NODE, "stop", state], timeout=120, check=False)


def job_state(env, job_id: str) -> dict:
    out = run(["scontrol", "-o", "show", "job", job_id], env=env, check=False).stdout
    return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)


def wait_job(env, job_id: str, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        info = job_state(env, job_id)
        if info.get("JobState") in {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}:
            return info
        assert time.monotonic() < deadline, f"job {job_id} still {info.get('JobState')} after {timeout}s"
        time.sleep(1)


def job_processes(job_id: str) -> dict[int, str]:
    """Processes of this Slurm job (SLURM_JOB_ID in their environment): never anyone else's."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            if f"SLURM_JOB_ID={job_id}".encode() in environ:
                found[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
        except OSError:
            continue
    return found


def job_listeners(job_id: str) -> dict[str, set[str]]:
    """Where this job's Dask and evalcore processes (and their children: a nanny runs its
    worker in one) listen: {address: {command lines}}. Slurm's own srun and slurmstepd are
    left out: they listen for the step's I/O, which is Slurm's business, not Dask's."""
    import psutil

    found: dict[str, set[str]] = {}
    for pid, cmd in job_processes(job_id).items():
        if not any(w in cmd for w in ("dask scheduler", "dask worker", "evalcore evaluate")):
            continue  # srun (listens on all addresses), slurmstepd, the batch script
        try:
            proc = psutil.Process(pid)
            for p in [proc, *proc.children(recursive=True)]:
                for c in p.net_connections(kind="tcp"):
                    if c.status == psutil.CONN_LISTEN:
                        found.setdefault(c.laddr.ip, set()).add(" ".join(p.cmdline())[:120])
        except psutil.Error:
            continue
    return found


def sbatch(env, workdir: Path, dataset: Path, out: Path, *resources: str, **knobs: str) -> str:
    """Submit deploy/slurm/evalcore.sbatch; without `resources`, with the script's own #SBATCH defaults."""
    job_env = {**env, "EVALCORE_VENV": str(VENV_BIN.parent), "EVALCORE_LOCAL_DIR": str(workdir / "local"),
               "CLUSTER_START_TIMEOUT": "120", **knobs}
    (workdir / "local").mkdir(exist_ok=True)
    proc = run(["sbatch", "--parsable", *resources, f"--chdir={workdir}", f"--output={workdir}/evalcore-%j.out",
                SBATCH, dataset, out], env=job_env, cwd=workdir)  # SLURM_SUBMIT_DIR: .evalcore goes here
    return proc.stdout.strip().split(";")[0]


def test_sbatch_with_its_defaults_runs_on_one_node_privately_and_quietly(slurm, dataset, local_report, tmp_path):
    """`sbatch deploy/slurm/evalcore.sbatch DATASET OUT` with nothing else: one node, the
    scheduler and 3 workers; everything of the job listens on 127.0.0.1 only (a Dask scheduler
    runs any code sent to it); the report equals the local run; the log of the successful job
    has no traceback and no error; no file and no process of the job is left."""
    out = tmp_path / "report"
    job_id = sbatch(slurm, tmp_path, dataset, out)
    listening: dict[str, set[str]] = {}
    deadline = time.monotonic() + 600
    while (info := job_state(slurm, job_id)).get("JobState") in {"PENDING", "CONFIGURING", "RUNNING", None}:
        assert time.monotonic() < deadline, f"job {job_id} still {info.get('JobState')}"
        for addr, cmds in job_listeners(job_id).items():
            listening.setdefault(addr, set()).update(cmds)
        time.sleep(0.3)
    log = (tmp_path / f"evalcore-{job_id}.out").read_text(errors="replace")
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", f"{info}\n{log[-4000:]}"
    assert info["NumNodes"] == "1" and info["NumTasks"] == "4", {k: info[k] for k in ("NumNodes", "NumTasks")}
    assert "waiting for 3 workers" in log, log[-2000:]
    assert set(listening) == {"127.0.0.1"}, f"the job's Dask processes listened on {listening}, not on loopback only"
    assert any("dask scheduler" in c for c in listening["127.0.0.1"]), listening  # not vacuous
    noise = [line for line in log.splitlines() if "Traceback" in line or " ERROR " in line]
    assert not noise, f"{len(noise)} traceback/error lines in the log of a successful job:\n{log[-4000:]}"
    assert_reports_equal(out, local_report)
    assert (tmp_path / ".evalcore").is_dir(), "the job never used its shared dir"
    assert not list((tmp_path / ".evalcore").glob(f"*{job_id}*")), "scheduler/multi-prog files left behind"
    deadline = time.monotonic() + 30
    while job_processes(job_id):
        assert time.monotonic() < deadline, f"processes left after the job: {job_processes(job_id)}"
        time.sleep(1)


def test_scancel_leaves_no_report_and_no_processes(slurm, tmp_path):
    big = tmp_path / "big.zarr"
    write_dataset(big, n_query=3000, n_gallery=40000, dims=128, seed=1)  # long enough to be cancelled mid-run
    out = tmp_path / "report"
    # resources and knobs given on the command line, as README shows for other shapes
    job_id = sbatch(slurm, tmp_path, big, out, "--nodes=1", "--ntasks=3", "--mem=6G", "--time=00:20:00",
                    WORKER_MEMORY_LIMIT="2GiB")
    log_path = tmp_path / f"evalcore-{job_id}.out"
    deadline = time.monotonic() + 180
    # Cancel in the middle of the evaluation: once the driver has reported its first chunk
    # done (of 12), not after a fixed sleep, which on an idle machine let it finish first.
    def log() -> str:
        return log_path.read_text(errors="replace") if log_path.exists() else ""

    while not re.search(r"chunk 1/\d+ done", log()):
        state = job_state(slurm, job_id).get("JobState")
        assert state in {"PENDING", "RUNNING", "CONFIGURING"}, f"job ended before it could be cancelled: {state}"
        assert time.monotonic() < deadline, f"the evaluation never started\n{log()[-3000:]}"
        time.sleep(0.2)
    seen = job_processes(job_id)
    run(["scancel", job_id], env=slurm)
    assert any("evalcore evaluate" in c for c in seen.values()), seen
    assert any("dask worker" in c for c in seen.values()), seen
    assert "report written" not in log(), "the evaluation finished before scancel: make the dataset bigger"
    info = wait_job(slurm, job_id, timeout=120)
    assert info["JobState"] == "CANCELLED", info
    deadline = time.monotonic() + 60
    while job_processes(job_id):
        assert time.monotonic() < deadline, f"stray processes after scancel: {job_processes(job_id)}"
        time.sleep(1)
    assert not out.exists(), f"scancel left a report at {out}: {list(out.iterdir())}"
    partial = [p.name for p in tmp_path.iterdir() if p.name.startswith(f".{out.name}.tmp-")]
    assert not partial, f"scancel left a partial report: {partial}"
    assert (tmp_path / ".evalcore").is_dir(), "the job never used its shared dir"
    assert not list((tmp_path / ".evalcore").glob(f"*{job_id}*")), "scheduler/multi-prog files left behind"


# --------------------------------------------------------------------------- Kubernetes (offline)


def k8s_documents() -> list[tuple[str, dict]]:
    docs = []
    for path in sorted(K8S_DIR.glob("*.yaml")):
        with path.open() as f:
            docs += [(path.name, d) for d in yaml.safe_load_all(f) if d]
    return docs


def _crd_json_schema(node, strict=True):
    """A CRD's openAPIV3Schema as JSON Schema, the way kubeconform's openapi2jsonschema
    converts it: `nullable` allows null, int-or-string allows both, and in strict mode an
    object with `properties` rejects unknown fields unless the schema preserves them
    (as the API server does with field validation Strict, kubectl's default)."""
    if isinstance(node, list):
        return [_crd_json_schema(n, strict) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _crd_json_schema(v, strict) for k, v in node.items()}
    if out.pop("x-kubernetes-int-or-string", False) or out.get("format") == "int-or-string":
        out.pop("type", None)
        out.pop("format", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    preserve = out.pop("x-kubernetes-preserve-unknown-fields", False)
    if strict and "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    return out


@pytest.fixture(scope="module")
def crd_schemas() -> dict[tuple[str, str], dict]:
    pytest.importorskip("jsonschema", reason="jsonschema comes with deploy/test-here.sh's tools, not the test extra")
    files = sorted(CRD_DIR.glob("*.yaml"))
    if not files:
        pytest.skip(f"no Dask operator CRDs in {CRD_DIR} (from the dask-kubernetes wheel): {HERE}")
    schemas = {}
    for path in files:
        crd = yaml.safe_load(path.read_text())
        assert crd["kind"] == "CustomResourceDefinition", path
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version.get("served", True):
                schema = _crd_json_schema(version["schema"]["openAPIV3Schema"])
                # The API server always accepts these three at the top of a custom
                # resource, whether or not the CRD's schema lists them.
                schema.setdefault("properties", {}).update({
                    "apiVersion": {"const": f"{group}/{version['name']}"},
                    "kind": {"const": kind},
                    "metadata": {"type": "object", "required": ["name"],
                                 "properties": {"name": {"type": "string"}}},
                })
                schemas[(f"{group}/{version['name']}", kind)] = schema
    return schemas


def test_kubernetes_manifests_validate_offline(crd_schemas):
    kv = pytest.importorskip(
        "kubernetes_validate", reason=f"kubernetes-validate is not installed (pip install kubernetes-validate): {HERE}")
    import jsonschema

    docs = k8s_documents()
    assert {d["kind"] for _, d in docs} >= {"DaskJob", "DaskCluster", "CronJob", "ConfigMap",
                                             "PersistentVolumeClaim"}, [d["kind"] for _, d in docs]
    versions = [kv.utils.latest_version() if v == "latest" else v for v in K8S_VERSIONS]
    errors, checked = [], []
    for name, doc in docs:
        where = f"{name}: {doc['kind']}/{doc['metadata']['name']}"
        key = (doc["apiVersion"], doc["kind"])
        if key in crd_schemas:
            validator = jsonschema.Draft202012Validator(crd_schemas[key])
            errs = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
            errors += [f"{where} ({doc['apiVersion']} CRD): {'.'.join(map(str, e.path))}: {e.message}"
                       for e in errs]
            checked.append(f"{where} against the Dask operator CRD")
            continue
        assert not doc["apiVersion"].startswith("kubernetes.dask.org"), f"{where}: no CRD for {key}"
        for version in versions:
            try:
                kv.validate(doc, version, strict=True)
            except kv.utils.ValidationError as e:
                errors.append(f"{where} (Kubernetes {version}): {'.'.join(map(str, e.path))}: {e.message}")
            except kv.utils.SchemaNotFoundError:
                errors.append(f"{where}: Kubernetes {version} has no schema for {doc['apiVersion']} {doc['kind']}")
        checked.append(f"{where} against Kubernetes {', '.join(versions)} (strict)")
    assert not errors, "manifests do not validate:\n" + "\n".join(errors)
    print("\n".join(checked))


def test_crd_validation_catches_mistakes(crd_schemas):
    """The CRD check is not vacuous: a misplaced key and a wrong type are rejected."""
    import copy

    import jsonschema

    (name, dj), = [(n, d) for n, d in k8s_documents() if d["kind"] == "DaskJob" and n == "daskjob.yaml"]
    schema = crd_schemas[(dj["apiVersion"], "DaskJob")]
    bad = copy.deepcopy(dj)
    bad["spec"]["cluster"]["spec"]["worker"]["replicas"] = "two"
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(bad))
    bad = copy.deepcopy(dj)
    bad["spec"]["cluster"]["spec"]["worker"]["containers"] = bad["spec"]["cluster"]["spec"]["worker"]["spec"]["containers"]
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(bad)), "unknown field must be rejected"
