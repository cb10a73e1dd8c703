#!/usr/bin/env bash
# Challenge scoring job: score every submission in a folder against one truth bundle.
#
#   jobs/score-submissions.sh TRUTH.zarr SUBMISSIONS_DIR SCORED_DIR [evalcore score options...]
#
# SUBMISSIONS_DIR holds one folder per team, and in it one folder (query.npy +
# gallery.npy, or a Zarr group with query/emb and gallery/emb) per submission:
#
#   submissions/team-a/run-1/{query.npy,gallery.npy}
#   submissions/team-b/final.zarr
#
# Each submission is scored once: SCORED_DIR/<team>/<submission>/result.json
# is the participant's result, .../organizer/ the full report, and
# SCORED_DIR/leaderboard.parquet (+ leaderboard_best.parquet) every scored
# submission. A submission already scored is skipped, so the job can run
# from cron as submissions arrive. A rejected submission (exit 2: its message
# names the array and rows) does not stop the others; the job exits 2 when
# any was rejected, 1 when any failed otherwise, else 0.
set -uo pipefail

if [[ $# -lt 3 ]]; then
    echo "usage: $0 TRUTH.zarr SUBMISSIONS_DIR SCORED_DIR [evalcore score options...]" >&2
    exit 2
fi
truth=$1 submissions=$2 scored=$3
shift 3
evalcore=${EVALCORE:-evalcore}
status=0 done_count=0 skipped=0
for team_dir in "$submissions"/*/; do
    team=$(basename "$team_dir")
    for sub in "$team_dir"*/; do
        sub=${sub%/}
        name=$(basename "$sub")
        out="$scored/$team/$name"
        if [[ -f "$out/result.json" ]]; then
            skipped=$((skipped + 1))
            continue
        fi
        "$evalcore" score "$sub" --truth "$truth" --out "$out" --team "$team" --name "$name" \
            --leaderboard "$scored/leaderboard.parquet" --quiet "$@"
        rc=$?
        if (( rc == 2 )); then
            (( status == 0 )) && status=2
        elif (( rc != 0 )); then
            status=1
        else
            done_count=$((done_count + 1))
        fi
    done
done
echo "scored $done_count submission(s), $skipped already scored, exit $status"
exit $status
