import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ovl } from "./testing.js";

const temp = () => mkdtempSync(join(tmpdir(), "ovl-attn-"));

describe("ovl emit ag-attention", () => {
  it("compiles the built-in flash-attention body against a ring AllGather of kv", async () => {
    const dir = temp();
    const r = await ovl([
      "emit",
      "ag-attention",
      "--seq",
      "512",
      "--heads",
      "4",
      "--kv-heads",
      "2",
      "--head-dim",
      "64",
      "--causal",
      "--world",
      "4",
      "--template",
      "ring",
      "--tile",
      "64x32",
      "--out",
      dir,
      "--json",
    ]);
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as { world: number; blocks: string; attention: unknown };
    expect(out).toMatchObject({ world: 4, blocks: "64x32", attention: { heads: 4, kvHeads: 2, headDim: 64, causal: true } });
    const m = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as { reference: { operator: string; rowsPerRank: number } };
    expect(m.reference).toMatchObject({ operator: "ag-attention", rowsPerRank: 128 });
    expect(readFileSync(join(dir, "plan.json"), "utf8")).toContain('"kv"');
  }, 60_000);

  it("refuses a sequence that does not split over the world, and missing sizes, writing nothing", async () => {
    const dir = join(temp(), "out");
    const odd = await ovl(["emit", "ag-attention", "--seq", "100", "--heads", "2", "--head-dim", "64", "--world", "3", "--out", dir]);
    expect(odd.status).not.toBe(0);
    expect(odd.stderr).toMatch(/S \(100\) is not a multiple of the world \(3\)/);
    const missing = await ovl(["emit", "ag-attention", "--heads", "2", "--head-dim", "64", "--out", dir]);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/needs --seq/);
    const gqa = await ovl([
      "emit",
      "ag-attention",
      "--seq",
      "64",
      "--heads",
      "3",
      "--kv-heads",
      "2",
      "--head-dim",
      "64",
      "--world",
      "2",
      "--out",
      dir,
    ]);
    expect(gqa.stderr).toMatch(/multiple of kvHeads/);
    const template = await ovl([
      "emit",
      "ag-attention",
      "--seq",
      "64",
      "--heads",
      "2",
      "--head-dim",
      "64",
      "--template",
      "direct",
      "--out",
      dir,
    ]);
    expect(template.stderr).toMatch(/swizzle, ring, hierarchical/);
    expect(() => readFileSync(join(dir, "manifest.json"))).toThrow();
  }, 60_000);
});
