// Test support: the import graph of the package's own modules (every relative `import` and
// `export … from` of the .ts files under src/, type-only ones included), and its cycles.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

/** Module path (relative to the root, `/`-separated) → the modules it imports. */
export type ImportGraph = ReadonlyMap<string, readonly string[]>;

const SPECIFIER =
  /(?:^|[\s;}])(?:import|export)\s[^;]*?from\s*["'](\.{1,2}\/[^"']+)["']|import\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)|(?:^|[\s;}])import\s*["'](\.{1,2}\/[^"']+)["']/g;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === "__golden__" ? [] : sources(path);
    return name.endsWith(".ts") ? [path] : [];
  });
}

/** The graph of every .ts module under `root` (a `./x.js` specifier names `x.ts`). */
export function importGraph(root: string): ImportGraph {
  const graph = new Map<string, string[]>();
  const key = (path: string) => relative(root, path).split("\\").join("/");
  for (const file of sources(root)) {
    const text = readFileSync(file, "utf8");
    const targets = [...text.matchAll(SPECIFIER)].map((m) =>
      key(resolve(dirname(file), (m[1] ?? m[2] ?? m[3]) as string).replace(/\.js$/, ".ts")),
    );
    graph.set(key(file), [...new Set(targets)]);
  }
  return graph;
}

/** Every cycle of `graph` found by depth-first search, each as the modules along it (first repeated last). */
export function importCycles(graph: ImportGraph): string[][] {
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const cycles: string[][] = [];
  const visit = (node: string): void => {
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue;
      const s = state.get(next);
      if (s === "open") cycles.push([...stack.slice(stack.indexOf(next)), next]);
      else if (s === undefined) visit(next);
    }
    stack.pop();
    state.set(node, "done");
  };
  for (const node of [...graph.keys()].sort()) if (!state.has(node)) visit(node);
  return cycles;
}
