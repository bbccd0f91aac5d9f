#!/usr/bin/env bash
# Runs the Python runner's tests in a package-local venv, creating it on first use. The
# `interpret` extra (torch 2.11.0, triton 3.6.0; CPU use only) runs the interpreter emulation tests, the
# `models` extra (transformers) the parallelized models' tests.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
fi
stamp=.venv/.ovl-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test,interpret,models]'
  touch "$stamp"
fi
# Type check (mypy), lint and format of the runner's Python (configured in pyproject.toml) before its tests.
.venv/bin/python -m mypy
.venv/bin/python -m ruff check src tests tests_gpu examples scripts
.venv/bin/python -m ruff format --check src tests tests_gpu examples scripts
exec .venv/bin/python -m pytest "$@"
