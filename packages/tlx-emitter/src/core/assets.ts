// Where the emitter reads the files it ships at run time: the built-in bodies (`kernels/`), the
// tuned tables (`configs/`), the examples (`examples/`) and tree-sitter's two wasm files.
//
// From the workspace (src/ under vitest, dist/ after tsup) or an npm install these are the
// package's own files and its dependencies' wasm, found from this module's location. The one-file
// bundle of the CLI (packages/cli/scripts/bundle.ts) has no package around it: esbuild defines
// `__OVL_ASSETS__` there as the folder, relative to the bundle file, into which the bundle script
// copied the same files (wasm under `wasm/`). Inside the bundle `import.meta.url` is the bundle's
// own URL, so the assets travel with it wherever it is installed (a Python wheel, a copied folder).
import { existsSync, readdirSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { EmitError } from "./writer/index.js";

// Set only by the bundle's build (esbuild `define`); absent everywhere else, so `typeof` guards it.
declare const __OVL_ASSETS__: string | undefined;

/** The wasm files the Python parser loads, by their module specifier in the installed packages. */
const WASM = {
  "tree-sitter.wasm": "web-tree-sitter/tree-sitter.wasm",
  "tree-sitter-python.wasm": "tree-sitter-python/tree-sitter-python.wasm",
} as const;
export type WasmFile = keyof typeof WASM;

/** The bundle's asset folder, or undefined outside the bundle. */
function bundledAssets(): string | undefined {
  return typeof __OVL_ASSETS__ === "string" ? fileURLToPath(new URL(__OVL_ASSETS__, import.meta.url)) : undefined;
}

/** The package root: the folder with package.json above this module (src/ or dist/). */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) {
    const up = dirname(dir);
    if (up === dir) throw new EmitError("bad-param", "cannot find @ovl/tlx-emitter's package root to read its built-in kernels");
    dir = up;
  }
  return dir;
}

/** The folder holding `kernels/`, `configs/` and `examples/`: the bundle's assets, else the package root. */
export function assetRoot(): string {
  return bundledAssets() ?? packageRoot();
}

/** Path of one of tree-sitter's wasm files: the bundle's copy, else the installed package's. */
export function wasmPath(file: WasmFile): string {
  const bundled = bundledAssets();
  return bundled !== undefined ? join(bundled, "wasm", file) : createRequire(import.meta.url).resolve(WASM[file]);
}

/** The folders under the package root that the emitter reads at run time. */
const ASSET_DIRS = ["kernels", "configs", "examples"] as const;

/**
 * Every file a copy of the assets needs (what the bundle script copies): `from`, its path here;
 * `to`, its path under the asset root the copy serves ({@link assetRoot}, `wasm/` for {@link wasmPath}).
 * Python caches are not assets.
 */
export function assetFiles(): { from: string; to: string }[] {
  const root = packageRoot();
  const files = ASSET_DIRS.flatMap((dir) =>
    readdirSync(join(root, dir), { recursive: true, encoding: "utf8" })
      .filter((rel) => !rel.split(sep).includes("__pycache__") && statSync(join(root, dir, rel)).isFile())
      .map((rel) => ({ from: join(root, dir, rel), to: join(dir, rel) })),
  );
  const require = createRequire(import.meta.url);
  const wasm = (Object.keys(WASM) as WasmFile[]).map((file) => ({ from: require.resolve(WASM[file]), to: join("wasm", file) }));
  return [...files, ...wasm].sort((a, b) => a.to.localeCompare(b.to));
}
