#!/usr/bin/env bash
# Bundles the built CLI (packages/cli/dist/bin.js) and its dependencies into one ESM file,
# for machines that have Node 20 but not the workspace (a GPU machine that gets only a copy
# of a few files). The bundle finds the Python runner through PYTHONPATH:
#   bash packages/cli/scripts/bundle.sh OUT.mjs
#   PYTHONPATH=packages/runtime-py/src node OUT.mjs demo --gpus 2
set -euo pipefail
out=${1:?usage: bundle.sh OUT.mjs}
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ -f "$here/dist/bin.js" ] || { echo "build the CLI first: pnpm --filter @ovl/cli build" >&2; exit 2; }
cd "$here"
# esbuild comes with tsup; `canvas` is an optional dependency of vega that SVG output never loads.
npx --no-install esbuild dist/bin.js --bundle --platform=node --format=esm --target=node20 --outfile="$out" \
  --external:canvas --log-level=warning \
  --banner:js="import { createRequire as __ovlRequire } from 'node:module'; const require = __ovlRequire(import.meta.url);"
echo "$out: $(wc -c <"$out") bytes"
