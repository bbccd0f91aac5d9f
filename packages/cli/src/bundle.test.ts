// The one-file bundle (scripts/bundle.ts): copied alone to a folder with no node_modules above it,
// it emits what the unbundled CLI emits, byte for byte, from its own assets. (The Python package's
// CI check runs the same under the wheel's Node for every torch-API operator.)
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { bundleCli } from "../scripts/bundle.js";
import { ovl } from "./testing.js";

const scratch = mkdtempSync(join(tmpdir(), "ovl-bundle-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Every file under `dir` with its bytes, by relative path. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const rel of readdirSync(dir, { recursive: true, encoding: "utf8" }).sort()) {
    const path = join(dir, rel);
    try {
      out[rel] = readFileSync(path, "base64");
    } catch {
      // a folder
    }
  }
  return out;
}

describe("the CLI bundle", () => {
  it("emits from its own assets exactly what the unbundled CLI emits", async () => {
    const built = await bundleCli(join(scratch, "build"));
    expect(built.bytes).toBeGreaterThan(1_000_000);
    expect(built.assets).toBeGreaterThan(15);
    const licenses = readFileSync(join(scratch, "build", "THIRD_PARTY_LICENSES.txt"), "utf8");
    for (const pkg of ["zod ", "commander ", "web-tree-sitter ", "tree-sitter-python ", "punycode "]) expect(licenses).toContain(pkg);
    // Moved away from the build folder: nothing may be found through the workspace.
    const alone = join(scratch, "alone");
    cpSync(join(scratch, "build"), alone, { recursive: true });
    rmSync(join(scratch, "build"), { recursive: true });

    const args = ["emit", "ag-attention", "--seq", "256", "--heads", "4", "--kv-heads", "2", "--head-dim", "64", "--world", "2"];
    const bundled = spawnSync(process.execPath, [join(alone, "ovl.mjs"), ...args, "--out", join(scratch, "b")], { encoding: "utf8" });
    expect(bundled.stderr).toBe("");
    expect(bundled.status).toBe(0);
    const dev = await ovl([...args, "--out", join(scratch, "d")]);
    expect(dev.status).toBe(0);
    expect(Object.keys(tree(join(scratch, "b")))).toContain("manifest.json");
    expect(tree(join(scratch, "b"))).toEqual(tree(join(scratch, "d")));
  }, 60_000);
});
