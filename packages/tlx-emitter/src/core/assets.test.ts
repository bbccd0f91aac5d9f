// The emitter's run-time files: outside the CLI bundle they are the package's own, and `assetFiles`
// lists every one that a copy (the bundle's assets/) needs, under the path the copy serves it from.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { computeConfigPath } from "../compute/configs.js";
import { assetFiles, assetRoot, wasmPath } from "./assets.js";
import { BUILTIN_BODIES, builtinBodyPath } from "./builtin.js";

describe("assets", () => {
  it("are the package's own files outside the bundle", () => {
    const root = assetRoot();
    expect(existsSync(join(root, "package.json"))).toBe(true);
    expect(builtinBodyPath("gemm_producer")).toBe(join(root, "kernels", "gemm_producer.py"));
    expect(computeConfigPath("h100")).toBe(join(root, "configs", "h100.json"));
    expect(wasmPath("tree-sitter.wasm")).toMatch(/web-tree-sitter[/\\]tree-sitter\.wasm$/);
    expect(existsSync(wasmPath("tree-sitter-python.wasm"))).toBe(true);
  });

  it("are all listed for a copy: every body, table, example and wasm file, and nothing else", () => {
    const files = assetFiles();
    const to = files.map((f) => f.to.split("\\").join("/"));
    for (const name of BUILTIN_BODIES) expect(to).toContain(`kernels/${name}.py`);
    expect(to).toEqual(expect.arrayContaining(["configs/h100.json", "examples/user-kernels/tutorial_matmul.py"]));
    expect(to).toEqual(expect.arrayContaining(["wasm/tree-sitter.wasm", "wasm/tree-sitter-python.wasm"]));
    expect(to.every((p) => /^(kernels|configs|examples|wasm)\//.test(p) && !p.includes("__pycache__"))).toBe(true);
    for (const f of files) expect(existsSync(f.from), f.from).toBe(true);
    expect(files.find((f) => f.to.endsWith("tree-sitter.wasm"))?.from).toBe(wasmPath("tree-sitter.wasm"));
  });
});
