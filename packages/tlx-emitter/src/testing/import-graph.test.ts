// The package's modules form no import cycle (type-only imports count: a cycle of types is
// still two modules that cannot be read apart), and the finder itself finds the cycles it should.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { importCycles, importGraph } from "./import-graph.js";

const SRC = join(dirname(fileURLToPath(import.meta.url)), "..");
const scratch = mkdtempSync(join(tmpdir(), "ovl-import-graph-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(scratch, "t-"));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

describe("import graph of src/", () => {
  it("has no cycle", () => {
    const graph = importGraph(SRC);
    expect(graph.size).toBeGreaterThan(100);
    expect(graph.get("index.ts")).toContain("compile/compile.ts");
    expect(importCycles(graph)).toEqual([]);
  });

  it("finds a cycle through type-only imports, re-exports and folders", () => {
    const root = tree({
      "a.ts": 'import type { B } from "./x/b.js";\nexport type A = B;\n',
      "x/b.ts": 'export { c } from "../c.js";\nexport type B = number;\n',
      "c.ts": 'import {\n  a,\n} from "./a.js";\nexport const c = a;\n',
      "d.ts": 'import { c } from "./c.js";\n',
    });
    expect(importCycles(importGraph(root))).toEqual([["a.ts", "x/b.ts", "c.ts", "a.ts"]]);
  });

  it("counts a side-effect import", () => {
    const root = tree({ "a.ts": 'import "./b.js";\n', "b.ts": 'import "./a.js";\n' });
    expect(importCycles(importGraph(root))).toEqual([["a.ts", "b.ts", "a.ts"]]);
  });

  it("finds none in a tree that only fans in", () => {
    const root = tree({
      "a.ts": 'import "./b.js";\nimport { c } from "./c.js";\n',
      "b.ts": 'export * from "./c.js";\n',
      "c.ts": "export const c = 1;\n",
    });
    expect(importCycles(importGraph(root))).toEqual([]);
  });
});
