// Copies @ovl/runtime-py's version (package.json, which `changeset version` bumps) into the Python
// runner `ovl-runtime` (src/ovl_runtime/_version.py, which pyproject.toml reads), so the npm driver
// and the PyPI runner are released at one version. Run by `pnpm version-packages` after
// `changeset version`; `--check` only reports a difference (exit 1), as the runner's
// tests/test_version.py does.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const pkgDir = join(dirname(fileURLToPath(import.meta.url)), "..", "packages", "runtime-py");
const { version } = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8")) as { version: string };
const file = join(pkgDir, "src", "ovl_runtime", "_version.py");
const text = readFileSync(file, "utf8");
const line = /^__version__ = "([^"]*)"$/m;
const current = line.exec(text)?.[1];
if (current === undefined) throw new Error(`${file}: no __version__ = "..." line`);
if (current === version) {
  console.log(`ovl-runtime ${version}: already @ovl/runtime-py's version`);
} else if (process.argv.includes("--check")) {
  console.error(`ovl-runtime is ${current} but @ovl/runtime-py is ${version}: run pnpm version-packages`);
  process.exit(1);
} else {
  writeFileSync(file, text.replace(line, `__version__ = "${version}"`));
  console.log(`ovl-runtime ${current} -> ${version}`);
}
