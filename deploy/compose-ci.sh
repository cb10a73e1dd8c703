#!/bin/bash
# CI with deploy/compose.yaml in one command: build the image (once), start the
# scheduler and N workers, wait until the workers have joined, run the job,
# then stop and remove every container, the pod and the network of the
# project, also when the job fails or this script is interrupted. The exit
# status is the job's (or the first failing step's).
#
#   deploy/compose-ci.sh                          # 2 workers, the job as compose.yaml defines it
#   deploy/compose-ci.sh --workers 4 evalcore evaluate /data/ds.zarr --out /data/report \
#       --scheduler tcp://scheduler:8786 --overwrite
#
# Environment: EVALCORE_COMPOSE, the compose command (default "docker compose";
# "podman-compose" works, 1.1 or later for --scale); COMPOSE_PROJECT_NAME;
# EVALCORE_UID/EVALCORE_GID (default: yours, so the report in /data is yours);
# and whatever compose.yaml reads (EVALCORE_DATA, EVALCORE_IMAGE, EVALCORE_BASE,
# EVALCORE_SCHEDULER_PORT, EVALCORE_DASHBOARD_PORT, AWS_*).
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
read -r -a COMPOSE <<< "${EVALCORE_COMPOSE:-docker compose}"
WORKERS=2
if [[ "${1:-}" == "--workers" ]]; then
    WORKERS=${2:?--workers needs a number}
    shift 2
fi
if ! [[ "$WORKERS" =~ ^[1-9][0-9]*$ ]]; then
    echo "--workers must be a positive integer, not '$WORKERS'" >&2
    exit 2
fi
export EVALCORE_UID=${EVALCORE_UID:-$(id -u)} EVALCORE_GID=${EVALCORE_GID:-$(id -g)}

compose() { "${COMPOSE[@]}" -f "$HERE/compose.yaml" "$@"; }
say() { printf 'compose-ci: %s\n' "$*" >&2; }

teardown() {
    local rc=$? down_rc
    trap - EXIT INT TERM
    say "stopping and removing the stack"
    # --remove-orphans: podman-compose's plain `down` removes only the first
    # replica of a scaled service, and then cannot remove the pod and network.
    compose down --remove-orphans >&2
    down_rc=$?
    if (( down_rc != 0 )); then
        say "\`down\` exited $down_rc: containers of the project may be left"
        (( rc == 0 )) && rc=$down_rc
    fi
    exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "building the image"
compose build || exit
say "starting the scheduler and $WORKERS workers"
compose up -d --scale "worker=$WORKERS" scheduler worker || exit
# Not every compose waits for the scheduler's health check (podman-compose with
# podman 4 does not), and the job fails after 30 s without workers: wait here,
# from a throwaway container of the same image on the same network.
say "waiting for $WORKERS workers"
compose run --rm --no-deps job python -c '
import sys
from distributed import Client
with Client("tcp://scheduler:8786", timeout="120s") as c:
    c.wait_for_workers(int(sys.argv[1]), timeout=300)
    n = len(c.scheduler_info(n_workers=-1)["workers"])
    print("compose-ci:", n, "workers joined", file=sys.stderr)
' "$WORKERS" || exit
say "running the job"
compose run --rm job "$@"
rc=$?
say "the job exited $rc"
exit "$rc"
