// `ovl emit moe-rs --any-rows`: one MoE + ReduceScatter for every token count (multiples of the slabs), the simulator's
// crossover priced as the GEMM+ReduceScatter of the same work, and the range flags checked against the slabs.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Manifest } from "@ovl/tlx-emitter";
import { describe, expect, it } from "vitest";
import { runCli } from "./cli.js";

const temp = () => mkdtempSync(join(tmpdir(), "ovl-moe-rs-rows-"));

async function run(args: string[]): Promise<{ status: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const status = await runCli(args, { out: (t) => (out += t), err: (t) => (err += t), interactive: false });
  return { status, out, err };
}

const moe = ["--tokens", "64", "--hidden", "64", "--intermediate", "32", "--experts", "4", "--topk", "2", "--world", "2"];

describe("ovl emit moe-rs --any-rows", () => {
  it("writes one MoE + ReduceScatter for every token count: the slabs' sizes, routing and runner kernels over T", async () => {
    const dir = temp();
    const r = await run(["emit", "moe-rs", ...moe, "--tile", "16x32x32", "--any-rows", "--max-rows", "512", "--out", dir]);
    expect(r.status, r.err).toBe(0);
    const m = Manifest.parse(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
    // 2 slabs a rank (the tokens halve evenly): multiples of 4, from one token a slab.
    expect(m.rows).toMatchObject({ range: { min: 4, max: 512 }, multiple: 4, at: 64 });
    expect(m.signals.slots).toBe(5);
    expect(Object.keys(m.rows?.kernels ?? {})).toContain("moe_topk_reduce_rs");
    expect(m.rows?.fallbackBelow === undefined).toBe(m.rows?.fallbackReason === undefined);
    expect(r.out).toContain("any token count 4..512 (multiples of 4), described at 64");
  });

  it("prices the crossover with the simulator at a large shape, and says where it does not overlap", async () => {
    const big = ["--tokens", "8192", "--hidden", "2048", "--intermediate", "192", "--experts", "8", "--topk", "2", "--world", "8"];
    const dir = temp();
    const r = await run(["emit", "moe-rs", ...big, "--split", "1", "--any-rows", "--out", dir]);
    expect(r.status, r.err).toBe(0);
    const m = Manifest.parse(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
    expect(m.rows).toMatchObject({ range: { min: 8, max: 32768 }, multiple: 8 });
    expect(m.rows?.fallbackReason).toMatch(
      /^simulated on H200_SXM: overlapping is slower than the grouped GEMM then the reduce-scatter at \d+ rows/,
    );
    expect(r.out).toContain(`below ${m.rows?.fallbackBelow} tokens not overlapped`);
  });

  it("refuses bounds off the slabs and the range flags without --any-rows (exit 2)", async () => {
    const off = await run(["emit", "moe-rs", ...moe, "--any-rows", "--max-rows", "510", "--out", temp()]);
    expect(off.status).toBe(2);
    expect(off.err).toContain("--max-rows 510 must be a multiple of the 4 slabs");
    const alone = await run(["emit", "moe-rs", ...moe, "--max-rows", "512", "--out", temp()]);
    expect(alone.status).toBe(2);
    expect(alone.err).toContain("--min-rows and --max-rows go with --any-rows");
  });
});
