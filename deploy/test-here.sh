#!/bin/bash
# Build and run the deploy/ targets on this machine: the image (podman), the
# compose stack (podman-compose), the Slurm batch script (a private single-node
# Slurm), and validate the Kubernetes manifests offline. Then runs
# pytest on tests/test_deploy_real.py (all marked `deploy`) and tests/test_deploy.py.
#
#   deploy/test-here.sh              # everything (root, Debian 12)
#   deploy/test-here.sh -k compose   # extra arguments go to pytest
#
# What it changes on the machine, and nothing else:
#   - apt-get installs: podman podman-compose runc debootstrap slurm-wlm munge
#     (the munge/slurm Debian services are not started or configured: a
#     policy-rc.d refuses every service start while apt-get runs, then goes).
#   - $STATE (default /var/tmp/evalcore-deploy, override with EVALCORE_DEPLOY_STATE):
#     the debootstrap rootfs of the local base image, a tools venv with
#     podman-compose 1.6.0 (Debian 12's 1.0.3 ignores --scale), the Dask
#     operator CRDs from the dask-kubernetes wheel.
#   - podman's local storage (root): the images localhost/evalcore-base:bookworm
#     (the stand-in for python:3.11-slim) and localhost/evalcore:deploy-test.
#   - the test venv (EVALCORE_VENV, default .venv of this repo): evalcore with
#     its [test] extra, plus kubernetes-validate.
# podman runs with CONTAINERS_CONF=deploy/podman/containers.conf (runc, no
# default ulimits); /etc/containers is not touched. Slurm runs from a temporary
# directory made by the tests (deploy/slurm/single-node.sh) and is stopped after.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
STATE=${EVALCORE_DEPLOY_STATE:-/var/tmp/evalcore-deploy}
VENV=${EVALCORE_VENV:-$ROOT/.venv}
BASE_IMAGE=${EVALCORE_BASE_IMAGE:-localhost/evalcore-base:bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DASK_KUBERNETES_VERSION=2026.3.0
KUBERNETES_VALIDATE_VERSION=1.37.0
PODMAN_COMPOSE_VERSION=1.6.0
export CONTAINERS_CONF="$ROOT/deploy/podman/containers.conf"
export EVALCORE_DEPLOY_STATE=$STATE EVALCORE_BASE_IMAGE=$BASE_IMAGE

T0=$(date +%s)
say() { printf '\n== [%4d s] %s\n' "$(( $(date +%s) - T0 ))" "$*"; }
[[ $(id -u) -eq 0 ]] || { echo "run as root (podman rootful, slurmd, apt-get)" >&2; exit 1; }
mkdir -p "$STATE"

say "Debian packages"
pkgs=(podman podman-compose runc debootstrap slurm-wlm munge)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    # Where systemd runs, installing munge would start its service: refuse that
    # (policy-rc.d exit 101 = "not allowed"), unless the machine has its own policy.
    POLICY=/usr/sbin/policy-rc.d
    if [[ ! -e $POLICY ]]; then
        printf '#!/bin/sh\n# deploy/test-here.sh: no service starts during its apt-get\nexit 101\n' > "$POLICY"
        chmod 755 "$POLICY"
        trap 'rm -f "$POLICY"' EXIT
    fi
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
    if grep -q "deploy/test-here.sh" "$POLICY" 2>/dev/null; then
        rm -f "$POLICY"
        trap - EXIT
    fi
else
    echo "already installed: ${pkgs[*]}"
fi

say "test venv $VENV"
if [[ ! -x "$VENV/bin/evalcore" ]]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q -e ".[test]"
fi
"$VENV/bin/pip" install -q "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"

say "tools: podman-compose $PODMAN_COMPOSE_VERSION, Dask operator CRDs (dask-kubernetes $DASK_KUBERNETES_VERSION)"
if [[ ! -x "$STATE/tools/bin/podman-compose" ]]; then
    python3 -m venv "$STATE/tools"
    "$STATE/tools/bin/pip" install -q "podman-compose==$PODMAN_COMPOSE_VERSION"
fi
if [[ ! -s "$STATE/dask-crds/daskjob.yaml" ]]; then
    rm -rf "$STATE/wheels" "$STATE/dask-crds"
    "$VENV/bin/pip" download -q --no-deps "dask-kubernetes==$DASK_KUBERNETES_VERSION" -d "$STATE/wheels"
    mkdir -p "$STATE/dask-crds"
    "$VENV/bin/python" - "$STATE/wheels"/dask_kubernetes-*.whl "$STATE/dask-crds" <<'EOF'
import sys, zipfile, pathlib
prefix = "dask_kubernetes/operator/deployment/helm/dask-kubernetes-operator/crds/"
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        if name.startswith(prefix) and name.endswith(".yaml"):
            (pathlib.Path(sys.argv[2]) / name[len(prefix):]).write_bytes(z.read(name))
EOF
fi
ls "$STATE/dask-crds"

say "local base image $BASE_IMAGE (Debian bookworm minbase + python3 3.11, stands in for python:3.11-slim)"
if ! podman image exists "$BASE_IMAGE"; then
    if [[ ! -x "$STATE/rootfs/usr/bin/python3" ]]; then
        rm -rf "$STATE/rootfs"
        debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
            bookworm "$STATE/rootfs" "$DEBIAN_MIRROR"
        # Trust the same extra CAs as the host: here, TLS to PyPI goes through a
        # proxy whose CA is only in /usr/local/share/ca-certificates.
        if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
            cp /usr/local/share/ca-certificates/*.crt "$STATE/rootfs/usr/local/share/ca-certificates/"
            chroot "$STATE/rootfs" update-ca-certificates
        fi
        rm -rf "$STATE"/rootfs/var/cache/apt/archives/*.deb "$STATE"/rootfs/var/lib/apt/lists/*
    fi
    tar -C "$STATE/rootfs" -c . | podman import --change 'CMD ["python3"]' - "$BASE_IMAGE"
fi
podman image ls "$BASE_IMAGE"

say "pytest tests/test_deploy_real.py (marked deploy: image build, demo in the container, compose, Slurm, Kubernetes validation)"
export MPLBACKEND=Agg EVALCORE_DEPLOY_TESTS=1
start=$(date +%s)
set +e
# one test process (-n 0): the deploy tests share one image, one compose project and one Slurm between them
"$VENV/bin/pytest" -n 0 -p no:cacheprovider -rs -v --durations=15 tests/test_deploy_real.py tests/test_deploy.py "$@"
rc=$?
set -e
echo "deploy tests: exit $rc in $(( $(date +%s) - start )) s; deploy/test-here.sh in all: $(( $(date +%s) - T0 )) s"
exit $rc
