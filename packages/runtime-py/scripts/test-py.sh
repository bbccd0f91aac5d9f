#!/usr/bin/env bash
# Runs the Python runner's tests (pytest, on the CPU) in the package-local venv
# (scripts/python-env.sh makes it on first use; the `interpret` extra, torch 2.11.0 and triton
# 3.6.0, runs the interpreter emulation tests, the `models` extra, transformers, the parallelized
# models' tests). The static checks (mypy, ruff) are scripts/check-py.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
py="$(bash scripts/python-env.sh)"
exec "$py" -m pytest "$@"
