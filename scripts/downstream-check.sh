#!/usr/bin/env bash
# Downstream install test: packs every published package exactly as `pnpm publish` would (pnpm
# rewrites `workspace:*` to the version; npm pack would not), installs the tarballs into a fresh
# project with plain `npm install` (third-party dependencies from the registry, as a user gets
# them), type-checks the packages' README examples (scripts/downstream/src) under strict
# NodeNext resolution with no skipLibCheck, then runs them. It fails when a published export,
# declaration or runtime file is missing or broken. Needs the packages built (`pnpm build`).
#   bash scripts/downstream-check.sh        # work dir: .downstream/ (git-ignored, rebuilt each run)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${OVL_DOWNSTREAM_DIR:-$root/.downstream}"
cd "$root"
start=$SECONDS

# The published packages: every packages/* that is not private.
mapfile -t names < <(node -e '
  const { readdirSync, readFileSync, existsSync } = require("node:fs");
  for (const d of readdirSync("packages")) {
    const f = `packages/${d}/package.json`;
    if (!existsSync(f)) continue;
    const p = JSON.parse(readFileSync(f, "utf8"));
    if (!p.private) console.log(p.name);
  }')
[ "${#names[@]}" -gt 0 ] || { echo "downstream: no published package found" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work/tarballs"
filters=()
for n in "${names[@]}"; do filters+=(--filter "$n"); done
pnpm -r "${filters[@]}" pack --pack-destination "$work/tarballs" > "$work/pack.log"

# The consumer: the README examples, a strict NodeNext tsconfig, and the tarballs as file: dependencies.
cp -R scripts/downstream "$work/project"
node -e '
  const { readdirSync, writeFileSync, readFileSync } = require("node:fs");
  const [work, names] = [process.argv[1], process.argv.slice(2)];
  const tarballs = readdirSync(`${work}/tarballs`);
  const dependencies = {};
  for (const name of names) {
    const stem = name.replace(/^@/, "").replace("/", "-");
    const file = tarballs.find((t) => t.startsWith(`${stem}-`) && /^\d/.test(t.slice(stem.length + 1)));
    if (!file) throw new Error(`no tarball for ${name} in ${tarballs.join(", ")}`);
    dependencies[name] = `file:../tarballs/${file}`;
  }
  // The same @types/node as the workspace (Node 20 is the oldest supported), TypeScript 5.9.3.
  const typesNode = JSON.parse(readFileSync("package.json", "utf8")).devDependencies["@types/node"];
  const pkg = { name: "ovl-downstream", private: true, type: "module", dependencies,
    devDependencies: { "@types/node": typesNode, typescript: "5.9.3" } };
  writeFileSync(`${work}/project/package.json`, JSON.stringify(pkg, null, 2) + "\n");
' "$work" "${names[@]}"

cd "$work/project"
# Plain npm, as a user installs; --prefer-offline reuses npm's cache for the third-party packages.
npm install --no-audit --no-fund --prefer-offline --loglevel=error > "$work/npm.log" 2>&1 || { cat "$work/npm.log" >&2; exit 1; }
grep -q '"skipLibCheck"' tsconfig.json && { echo "downstream: tsconfig.json must not skip library checks" >&2; exit 1; }
./node_modules/.bin/tsc -p tsconfig.json
node dist/main.js
echo "downstream: ${#names[@]} packages packed, installed with npm, type-checked and run in $((SECONDS - start)) s"
