#!/usr/bin/env bash
# README command 2: sets up .venv (scripts/venv.sh) and runs every unit and
# integration test under tests/. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
python -m pytest -n auto tests "$@"
