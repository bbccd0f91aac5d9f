#!/usr/bin/env bash
# Makes the runner's venv (packages/runtime-py/.venv: ovl-runtime editable with its `test`, `models` and
# `interpret` extras, i.e. torch 2.11.0 and triton 3.6.0 on the CPU) when missing or older than
# pyproject.toml or the version file, and prints its python. Shared: the runner's tests
# (test-py.sh) and @ovl/tlx-emitter's AOT check (test-aot.sh, which needs the same triton) both
# call it, possibly at once under turbo, so creation holds a lock and the ~GBs download once.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$PWD/.venv"
stamp="$venv/.ovl-installed"
exec 9>"$venv.lock"
flock 9
if [ ! -x "$venv/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$venv" >&2
fi
# The version file too: the editable install's metadata (ovl-runtime's version) is written at install.
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ src/ovl_runtime/_version.py -nt "$stamp" ]; then
  echo "installing ovl-runtime[test,interpret,models] into $venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[test,interpret,models]' >&2
  touch "$stamp"
fi
echo "$venv/bin/python"
