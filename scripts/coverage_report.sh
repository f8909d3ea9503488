#!/usr/bin/env bash
# Combine the run's coverage data and write every report into reports/.
#
#   scripts/coverage_report.sh            # after e.g. `coverage run -m pytest -n auto`
#   COVERAGE_MIN_CORE=85 scripts/coverage_report.sh
#
# Uses the [tool.coverage.*] settings of pyproject.toml (data_file
# reports/.coverage, parallel, patch = subprocess/fork/_exit, so forked
# `multiprocess` children left their own data files). Writes
# reports/coverage/ (HTML), reports/coverage.xml, reports/coverage.json and
# prints the text summary. Exit 2 (coverage.py's own `--fail-under`) when
# thatch_core's coverage is below COVERAGE_MIN_CORE (percent, default 0: no
# gate). Other failures exit 1. Runs the `python` on PATH (scripts/main.sh
# puts .venv's first).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RC="--rcfile=pyproject.toml"
PY=python
MIN="${COVERAGE_MIN_CORE:-0}"
mkdir -p reports

# Parallel data files from this run. With none, keep an already combined
# reports/.coverage (re-running the script must not wipe it); with neither,
# there is nothing to report.
shopt -s nullglob
parts=(reports/.coverage.*)
shopt -u nullglob
if (( ${#parts[@]} > 0 )); then
    "$PY" -m coverage combine "$RC" --quiet
elif [[ -f reports/.coverage ]]; then
    echo "coverage_report: no new data files; reporting the existing reports/.coverage" >&2
else
    echo "coverage_report: no coverage data in reports/ (run the tests under coverage first)" >&2
    exit 1
fi

"$PY" -m coverage html "$RC" -d reports/coverage --quiet
"$PY" -m coverage xml "$RC" -o reports/coverage.xml --quiet
"$PY" -m coverage json "$RC" -o reports/coverage.json --quiet
"$PY" -m coverage report "$RC"

# The gate: thatch_core's own coverage, as coverage.py counts it with this
# configuration (statements and branches). The command-line shell
# (thatch_core/__main__.py: argv, stdin, the SDK's stdio server) is left out:
# no scenario runs it, the unit tests run it as real subprocesses, and the
# fake hosts drive the same logic through thatch_core.doors.
echo "thatch_core coverage (minimum ${MIN}%):"
"$PY" -m coverage report "$RC" --include='thatch_core/*' --omit='thatch_core/__main__.py' \
    --format=total --precision=2 --fail-under="$MIN"
