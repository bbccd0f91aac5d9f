#!/usr/bin/env bash
# The runner's pure dependencies for a GPU machine without a package index: jsonschema (the
# manifest check of load_manifest) and what it needs, as Python 3.12 x86_64 wheels unpacked
# into one folder (default out-deps/, git-ignored). Carry it and put it on PYTHONPATH there:
#   PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps python3 ...
set -euo pipefail
out="${1:-out-deps}"
py="${PYTHON:-packages/runtime-py/.venv/bin/python}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download --quiet --disable-pip-version-check "jsonschema>=4.18" --python-version 3.12 --only-binary=:all: \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d "$tmp"
mkdir -p "$out"
for w in "$tmp"/*.whl; do "$py" -m zipfile -e "$w" "$out"; done
echo "$out:" "$out"/*
