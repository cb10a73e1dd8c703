#!/usr/bin/env bash
# Batch submission job: evaluate a list of datasets, one report folder each.
#
#   jobs/batch-evaluate.sh LIST REPORTS_DIR [evalcore evaluate options...]
#
# LIST has one dataset per line (a path or URL; blank lines and lines starting
# with # are skipped); each goes to REPORTS_DIR/<dataset name without .zarr>.
# Options after REPORTS_DIR apply to every evaluation, e.g. a shared cluster:
#
#   jobs/batch-evaluate.sh models.txt reports --scheduler tcp://scheduler:8786 --protocol reid
#
# Inside a Slurm allocation, deploy/slurm/evalcore.sbatch starts the cluster;
# this script is what to run against it for many datasets. A dataset with bad
# input (exit 2) does not stop the others; a rerun replaces earlier reports
# (--overwrite only ever replaces an evalcore report folder). Exit status: 0
# all done, 2 some had bad input, 1 some failed otherwise.
set -uo pipefail

if [[ $# -lt 2 ]]; then
    echo "usage: $0 LIST REPORTS_DIR [evalcore evaluate options...]" >&2
    exit 2
fi
list=$1 reports=$2
shift 2
evalcore=${EVALCORE:-evalcore}
status=0 n=0
while IFS= read -r dataset || [[ -n "$dataset" ]]; do
    dataset=${dataset%%#*}
    dataset=$(echo "$dataset" | xargs)
    [[ -z "$dataset" ]] && continue
    name=$(basename "${dataset%/}" .zarr)
    "$evalcore" evaluate "$dataset" --out "$reports/$name" --overwrite --quiet "$@"
    rc=$?
    n=$((n + 1))
    if (( rc == 2 )); then
        (( status == 0 )) && status=2
    elif (( rc != 0 )); then
        status=1
    fi
done < "$list"
echo "evaluated $n dataset(s), exit $status"
exit $status
