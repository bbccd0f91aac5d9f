#!/usr/bin/env bash
# Static checks of the runner's Python: type check (mypy), lint and format (ruff), configured in
# pyproject.toml. Part of the package's `type-check` task, which needs no build, so under turbo
# it (and the venv it makes on first use, scripts/python-env.sh) runs at the start, beside the
# builds, instead of ahead of pytest at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
py="$(bash scripts/python-env.sh)"
"$py" -m mypy
"$py" -m ruff check src tests tests_gpu examples scripts
"$py" -m ruff format --check src tests tests_gpu examples scripts
