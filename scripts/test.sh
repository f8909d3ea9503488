#!/usr/bin/env bash
# Sets up and runs every unit and integration test (README command 2).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e '.[test]'
python -m pytest -n auto tests
