#!/usr/bin/env bash
# Prepares, on a machine without a GPU, the two GPU runs that measure on-device tuning (one H200):
#   out-tune-bench/  emit-compute.ts tune: per shape off the tuned tables (and three suite controls) the
#                    candidates the runtime's tuner times, emitted for compute_bench.py (table pick vs tuned pick)
#   out-tune-kern/   the torch API's kernels and their candidates for tune_runtime.py (the runtime's tuner end to
#                    end, no compiler needed there)
#   out-deps/        the runner's pure dependencies (jsonschema) for a machine without a package index
# All three are git-ignored (/out-*/); carry them. Then, on the GPU machine, one command each:
#   PYTHONPATH=packages/runtime-py/src:out-deps python3 packages/bench/gpu/compute_bench.py out-tune-bench --json tune-bench.json --budget-s 240
#   OVL_KERNELS=out-tune-kern PYTHONPATH=packages/runtime-py/src:out-deps python3 packages/bench/gpu/tune_runtime.py run --out tune-runtime.json
set -euo pipefail
cd "$(dirname "$0")/../../.."
root="$PWD"
py="${PYTHON:-packages/runtime-py/.venv/bin/python}"
pnpm turbo run build --filter=@ovl/cli... --output-logs=errors-only
rm -rf out-tune-bench out-tune-kern
(cd packages/sim && pnpm exec tsx scripts/compute-tables/emit-compute.ts tune "$root/out-tune-bench" --target h200)
OVL_CLI="node $root/packages/cli/dist/bin.js" PYTHONPATH=packages/runtime-py/src "$py" packages/bench/gpu/tune_runtime.py prepare out-tune-kern
[ -d out-deps ] || bash packages/bench/gpu/vendor-deps.sh out-deps
du -sh out-tune-bench out-tune-kern out-deps
