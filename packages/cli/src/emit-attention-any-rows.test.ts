// `ovl emit ag-attention --any-rows`: one attention operator for every sequence length of a range (the swizzle push
// AllGather of K/V only), and the simulator's crossover below which the runner does not overlap.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Manifest } from "@ovl/tlx-emitter";
import { describe, expect, it } from "vitest";
import { attentionRowsRequest } from "./commands/rows-attention.js";
import { ovl } from "./testing.js";

const temp = () => mkdtempSync(join(tmpdir(), "ovl-attn-any-"));

async function run(args: string[]): Promise<{ status: number | null; out: string; err: string }> {
  const r = await ovl(args);
  return { status: r.status, out: r.stdout, err: r.stderr };
}

const small = ["--seq", "512", "--heads", "2", "--head-dim", "16", "--world", "2", "--tile", "32x16"];

describe("ovl emit ag-attention --any-rows", () => {
  it("writes one operator for every sequence length, its kv gathered by host copies over S", async () => {
    const dir = temp();
    const r = await run(["emit", "ag-attention", ...small, "--causal", "--any-rows", "--max-rows", "1024", "--out", dir]);
    expect(r.status, r.err).toBe(0);
    expect(r.out).toContain("rows: every M from 66 to 1024 in multiples of 2 (described at 512)");
    const m = Manifest.parse(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
    // Two chunks a rank of at least one 16-row kv block each: 2 · (2·16 + 1) = 66 positions at least.
    expect(m.rows).toMatchObject({ range: { min: 66, max: 1024 }, multiple: 2, at: 512 });
    expect(m.rows?.fallbackBelow === undefined).toBe(m.rows?.fallbackReason === undefined);
    expect(Object.keys(m.rows?.tables ?? {}).sort()).toEqual(["ovl_kv_group_block", "ovl_kv_group_start"]);
  });

  it("refuses a ring or pull plan and range flags without --any-rows", async () => {
    for (const extra of [
      ["--template", "ring"],
      ["--side", "pull"],
    ]) {
      const r = await run(["emit", "ag-attention", ...small, ...extra, "--any-rows", "--out", temp()]);
      expect(r.status, extra.join(" ")).toBe(2);
      expect(r.err).toContain("ag-attention --any-rows gathers K/V by the swizzle push AllGather");
    }
    const flags = await run(["emit", "ag-attention", ...small, "--max-rows", "1024", "--out", temp()]);
    expect(flags.status).toBe(2);
    expect(flags.err).toContain("--min-rows and --max-rows go with --any-rows");
  });

  it("takes the simulator's crossover: eight ranks of 32 heads do not overlap short sequences", () => {
    const attention = { S: 4096, heads: 32, kvHeads: 32, headDim: 128, causal: true };
    const r = attentionRowsRequest({ attention, world: 8, split: 2 }, {});
    expect(r.max).toBe(32768);
    expect(r.fallbackBelow).toBeGreaterThan(1024);
    expect(r.fallbackBelow! % 8).toBe(0);
    expect(r.fallbackReason).toMatch(/^simulated on H200_SXM: overlapping is slower than the AllGather of K\/V then attention at/);
  });
});
