#!/usr/bin/env bash
# The package's tests: the runner's pytest (scripts/test-py.sh) and the driver's vitest, side by
# side. They are independent; pytest is the longest task of `pnpm test` and keeps one core busy,
# so the driver's tests (which mostly wait on pip and on the runner they spawn) overlap it
# instead of following it. Run by `pnpm test` (turbo) as this package's `test`.
set -euo pipefail
cd "$(dirname "$0")/.."
# The venv first, before either starts: the driver's runner tests skip themselves without it.
bash scripts/python-env.sh > /dev/null
bash scripts/test-py.sh &
pytest=$!
status=0
vitest run --testTimeout=60000 || status=$?
wait "$pytest" || status=$?
exit "$status"
