// Bundles the built `ovl` CLI (dist/bin.js) with everything it needs at run time into one folder
// that runs anywhere Node >= 20 does, with no workspace and no node_modules:
//
//   OUT/ovl.mjs                     the CLI and its JavaScript dependencies, one ESM file
//   OUT/assets/                     the emitter's files (kernels/, configs/, examples/, wasm/)
//   OUT/THIRD_PARTY_LICENSES.txt    the licenses of the bundled packages
//
//   pnpm --filter @ovl/cli build:bundle OUT       (OUT relative to packages/cli, or absolute)
//   node OUT/ovl.mjs emit ag-gemm --m 256 --n 256 --k 512 --world 2 --out m/
//
// The Python runtime ships this folder in its wheel (packages/runtime-py/scripts/build-compiler.sh).
// `ovl run` and `ovl demo` from it start the Python runner with `python3`: ovl-runtime installed, or
// its sources on PYTHONPATH.
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { assetFiles } from "@ovl/tlx-emitter";
import { build, type Metafile } from "esbuild";

const CLI_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
/** Where the bundle finds its assets, relative to itself (the emitter's `__OVL_ASSETS__`). */
const ASSETS = "./assets/";

/** What {@link bundleCli} wrote. */
export interface BundleResult {
  readonly bundle: string;
  readonly bytes: number;
  readonly assets: number;
}

/**
 * Writes the bundle, its assets and the license notices into `out` (its previous bundle, assets
 * and notices are replaced; nothing else there is touched). @throws when the CLI is not built.
 */
export async function bundleCli(out: string): Promise<BundleResult> {
  const entry = join(CLI_ROOT, "dist", "bin.js");
  if (!existsSync(entry)) throw new Error(`${entry} is missing: build the CLI first (pnpm turbo run build --filter=@ovl/cli...)`);
  const bundle = join(out, "ovl.mjs");
  const assets = join(out, ASSETS);
  rmSync(bundle, { force: true });
  rmSync(assets, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const result = await build({
    entryPoints: [entry],
    outfile: bundle,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    // `canvas` is an optional dependency of vega that SVG output never loads.
    external: ["canvas"],
    // tr46 (under vega's node-fetch) requires Node's builtin punycode, which Node >= 21 (the Python
    // wheel's Node is 24) warns about on every run; the same code from npm is silent.
    alias: { punycode: "punycode/punycode.js" },
    define: { __OVL_ASSETS__: JSON.stringify(ASSETS) },
    // CommonJS dependencies call require() for Node's builtins, which an ES module lacks.
    banner: { js: "import { createRequire as __ovlRequire } from 'node:module'; const require = __ovlRequire(import.meta.url);" },
    absWorkingDir: CLI_ROOT,
    metafile: true,
    logLevel: "warning",
  });
  const files = assetFiles();
  for (const f of files) {
    mkdirSync(dirname(join(assets, f.to)), { recursive: true });
    cpSync(f.from, join(assets, f.to));
  }
  const wasm = files.filter((f) => f.to.endsWith(".wasm")).map((f) => f.from);
  writeFileSync(join(out, "THIRD_PARTY_LICENSES.txt"), licenseNotices(result.metafile, wasm));
  return { bundle, bytes: statSync(bundle).size, assets: files.length };
}

/** The folder of the npm package holding `file`, or undefined for the workspace's own code. */
function packageDirOf(file: string): string | undefined {
  const parts = resolve(CLI_ROOT, file).split(sep);
  const i = parts.lastIndexOf("node_modules");
  if (i < 0) return undefined;
  const scoped = parts[i + 1]?.startsWith("@") === true;
  return parts.slice(0, i + (scoped ? 3 : 2)).join(sep);
}

/**
 * One notice per third-party package in the bundle (its code, or a wasm file copied beside it):
 * name, version, license and the text of its license file. ovl's own packages are Apache-2.0,
 * like the Python package that ships the bundle.
 */
function licenseNotices(meta: Metafile, copied: readonly string[]): string {
  const dirs = new Set<string>();
  for (const file of [...Object.keys(meta.inputs), ...copied]) {
    const dir = packageDirOf(file);
    if (dir !== undefined) dirs.add(dir);
  }
  const notices = [...dirs].map((dir) => {
    const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name: string; version: string; license?: string };
    const licenseFile = readdirSync(dir).find((n) => /^licen[cs]e/i.test(n));
    const text =
      licenseFile !== undefined
        ? readFileSync(join(dir, licenseFile), "utf8").trim()
        : `(no license file; package.json says ${pkg.license ?? "nothing"})`;
    return { id: `${pkg.name}@${pkg.version}`, head: `${pkg.name} ${pkg.version} (${pkg.license ?? "unknown"})`, text };
  });
  notices.sort((a, b) => a.id.localeCompare(b.id));
  const unique = notices.filter((n, i) => i === 0 || notices[i - 1]?.id !== n.id);
  const rule = "-".repeat(72);
  return [
    "The ovl compiler bundle (ovl.mjs and assets/wasm) contains the following third-party packages.",
    "",
    ...unique.map((n) => `${rule}\n${n.head}\n${rule}\n${n.text}\n`),
  ].join("\n");
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const out = process.argv[2];
  if (out === undefined || out.startsWith("-")) {
    process.stderr.write("usage: bundle.ts OUT_DIR (writes OUT_DIR/ovl.mjs, OUT_DIR/assets/, OUT_DIR/THIRD_PARTY_LICENSES.txt)\n");
    process.exit(2);
  }
  const r = await bundleCli(resolve(out));
  process.stdout.write(`${r.bundle}: ${r.bytes} bytes, ${r.assets} asset files\n`);
}
