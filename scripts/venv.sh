# Sourced by scripts/main.sh and scripts/test.sh (from the repository root):
# make sure .venv holds this checkout, installed with its test extras, and put
# .venv/bin first on PATH.
#
# The project installs into its own virtual environment, never into the
# interpreter it finds: a Debian/Ubuntu system Python refuses `pip install`
# (PEP 668, "externally-managed-environment"), and an interpreter is shared
# with other projects. The install is skipped while pyproject.toml and the
# venv's Python are what it was made from (.venv/.thatch-installed).
#
#   THATCH_PYTHON=python3.12 bash scripts/test.sh   # create .venv with another interpreter
#
# (.venv is made once: delete it to switch interpreters.)

VENV=.venv
BASE_PYTHON="${THATCH_PYTHON:-python3}"

venv_fail() {
    echo "setup: $*" >&2
    exit 2
}

venv_usable() {
    [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -m pip --version >/dev/null 2>&1
}

venv_create() {
    command -v "$BASE_PYTHON" >/dev/null \
        || venv_fail "no $BASE_PYTHON on PATH — install Python 3.11 or newer, or set THATCH_PYTHON"
    "$BASE_PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        || venv_fail "$("$BASE_PYTHON" -V 2>&1) is too old — Python 3.11 or newer is needed (set THATCH_PYTHON)"
    rm -rf "$VENV"
    "$BASE_PYTHON" -m venv "$VENV" \
        || venv_fail "'$BASE_PYTHON -m venv' failed — on Debian/Ubuntu: apt-get install python3-venv"
}

venv_fingerprint() {
    "$VENV/bin/python" -c 'import hashlib, sys; print(hashlib.sha256(open("pyproject.toml", "rb").read()).hexdigest(), sys.version.split()[0])'
}

venv_usable || venv_create
if [[ "$(cat "$VENV/.thatch-installed" 2>/dev/null)" != "$(venv_fingerprint)" ]]; then
    echo "setup: installing this checkout into $VENV (pip install -e '.[test,real]')" >&2
    PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip install -q -e '.[test,real]'
    venv_fingerprint > "$VENV/.thatch-installed"
fi
export VIRTUAL_ENV="$PWD/$VENV"
export PATH="$VIRTUAL_ENV/bin:$PATH"
