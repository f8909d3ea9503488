#!/usr/bin/env bash
# Flakiness check: runs the scenario suite and then the unit tests RUNS times
# in a row (default 20) while BUSY shell busy loops (default 2) hold the
# cores, as CI's busy 2-core machines do. One summary line per run (exit
# codes, seconds, pytest's last line, load average) goes to stdout and to
# LOG_DIR/summary; each run's full pytest output stays in LOG_DIR. Stops at
# the first failing run and exits with its status.
#   bash scripts/stress.sh [RUNS] [LOG_DIR]      (BUSY=0 for a quiet machine)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
runs="${1:-20}"
logs="${2:-$(mktemp -d -t thatch-stress-XXXXXX)}"
mkdir -p "$logs"

busy=()
trap 'kill "${busy[@]}" 2>/dev/null' EXIT
for _ in $(seq 1 "${BUSY:-2}"); do
    ( while :; do :; done ) &
    busy+=($!)
done

say() { echo "$*" | tee -a "$logs/summary"; }
say "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') · ${#busy[@]} busy loops · $(nproc) cores · logs in $logs"
pytest_args=(-n 2 -q -p no:cacheprovider)
for i in $(seq 1 "$runs"); do
    t0=$SECONDS
    python -m pytest "${pytest_args[@]}" scenarios >"$logs/scenarios-$i.log" 2>&1; rs=$?
    t1=$SECONDS
    python -m pytest "${pytest_args[@]}" tests >"$logs/tests-$i.log" 2>&1; rt=$?
    t2=$SECONDS
    say "run $i/$runs: scenarios exit $rs in $((t1 - t0)) s [$(tail -n 1 "$logs/scenarios-$i.log")]" \
        "· tests exit $rt in $((t2 - t1)) s [$(tail -n 1 "$logs/tests-$i.log")]" \
        "· load $(cut -d' ' -f1-3 /proc/loadavg)"
    if ((rs || rt)); then
        say "run $i failed: see $logs/scenarios-$i.log and $logs/tests-$i.log"
        exit $((rs ? rs : rt))
    fi
done
say "$runs runs in a row passed"
