// `pnpm --filter @ovl/bench results:index [--check]`: regenerates results/index.md,
// docs/performance.md and the operator table between the ovl:results markers of every
// markdown file of the repository; --check writes nothing and fails on a file that differs.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { indexMarkdown, operatorTable, performanceMarkdown, replaceMarkers } from "./render.js";
import { loadRuns, REPO_ROOT } from "./schema.js";

const SKIP = new Set(["node_modules", ".git", "dist", "results", ".turbo"]);

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (SKIP.has(e.name) || e.name.startsWith(".venv")) return [];
    const path = join(dir, e.name);
    return e.isDirectory() ? markdownFiles(path) : e.name.endsWith(".md") ? [path] : [];
  });
}

/** Every generated file under `root` (absolute path → content) from the runs of `root`/results/runs. */
export function generate(root: string = REPO_ROOT): Map<string, string> {
  const runs = loadRuns(join(root, "results/runs"));
  const out = new Map([
    [join(root, "results/index.md"), indexMarkdown(runs)],
    [join(root, "docs/performance.md"), performanceMarkdown(runs)],
  ]);
  for (const file of markdownFiles(root)) {
    const text = readFileSync(file, "utf8");
    const prefix = `${relative(dirname(file), join(root, "results/runs")) || "."}/`;
    const next = replaceMarkers(text, operatorTable(runs, prefix));
    if (next !== text) out.set(file, next);
  }
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const check = process.argv.includes("--check");
  const stale = [...generate()].filter(([file, text]) => !existsSync(file) || readFileSync(file, "utf8") !== text);
  for (const [file, text] of stale) {
    if (!check) writeFileSync(file, text);
    console.error(`${check ? "stale" : "wrote"}: ${relative(REPO_ROOT, file)}`);
  }
  if (check && stale.length > 0) process.exit(1);
}
