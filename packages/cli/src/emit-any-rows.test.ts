// `--any-rows`: ag-gemm, gemm-rs, gemm-ar and a2a-gemm compile one operator for every row count of a range; the range flags
// go with it (a usage error, exit 2, both in `ovl emit` and `ovl candidates`), and the default range and
// the simulator's sweep are computed in one place (`commands/rows.ts`).
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Manifest } from "@ovl/tlx-emitter";
import { describe, expect, it } from "vitest";
import { runCli } from "./cli.js";
import { anyRowsFlags, defaultMaxRows, rowSweep } from "./commands/rows.js";

const temp = () => mkdtempSync(join(tmpdir(), "ovl-any-rows-"));

async function run(args: string[]): Promise<{ status: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const status = await runCli(args, { out: (t) => (out += t), err: (t) => (err += t), interactive: false });
  return { status, out, err };
}

const small = ["--m", "256", "--n", "64", "--k", "64", "--world", "2", "--tile", "32x64x32"];

describe("ovl emit gemm-rs|gemm-ar|a2a-gemm --any-rows", () => {
  it("writes one operator for every row count, its partial rows moved by SM pushes", async () => {
    const dir = temp();
    const r = await run(["emit", "gemm-rs", ...small, "--any-rows", "--max-rows", "512", "--out", dir]);
    expect(r.status, r.err).toBe(0);
    const m = Manifest.parse(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
    expect(m.rows).toMatchObject({ range: { min: 130, max: 512 }, multiple: 2, at: 256 });
    expect(m.kernels.map((k) => k.template.kind)).toEqual(["local-producer", "sm-push", "rs-reduce-rows"]);
    expect(m.rows?.fallbackBelow === undefined).toBe(m.rows?.fallbackReason === undefined);
    expect(readFileSync(join(dir, "rs_reduce_rows.py"), "utf8")).toContain("ovl_rows // 2");
  });

  it("writes one partitioned GEMM+AllReduce for every row count", async () => {
    const dir = temp();
    const r = await run(["emit", "gemm-ar", ...small, "--any-rows", "--max-rows", "512", "--out", dir]);
    expect(r.status, r.err).toBe(0);
    const m = Manifest.parse(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
    expect(m.rows).toMatchObject({ range: { min: 130, max: 512 }, multiple: 2, at: 256 });
    expect(m.kernels.map((k) => k.template.kind)).toEqual(["local-producer", "sm-push", "ar-reduce-broadcast-rows", "slot-wait"]);
  });

  it("refuses another transfer backend and operators compiled per M, naming what works", async () => {
    const ce = await run(["emit", "gemm-rs", ...small, "--any-rows", "--backend", "copy-engine", "--out", temp()]);
    expect(ce.status).toBe(2);
    expect(ce.err).toContain("SM pushes; drop --backend copy-engine or --any-rows");
    const tilewise = await run(["emit", "gemm-ar", ...small, "--any-rows", "--template", "tilewise", "--out", temp()]);
    expect(tilewise.status).toBe(2);
    expect(tilewise.err).toContain("partitioned GEMM+AllReduce (--template direct)");
    const a2a = await run(["emit", "a2a-gemm", ...small, "--any-rows", "--backend", "sm", "--out", temp()]);
    expect(a2a.status).toBe(2);
    expect(a2a.err).toContain("a2a-gemm --any-rows exchanges its slabs with host copies instantiated per M; drop --backend sm");
    const moe = await run(["emit", "ag-gemm-silu", ...small, "--any-rows", "--out", temp()]);
    expect(moe.status).not.toBe(0);
    expect(moe.err).toMatch(/unknown option '--any-rows'|compiles ag-gemm, gemm-rs, gemm-ar, a2a-gemm for every row count/);
  });

  it("writes one AllToAll+GEMM for every row count, its slabs exchanged by host copies over M", async () => {
    const dir = temp();
    const r = await run(["emit", "a2a-gemm", ...small, "--any-rows", "--max-rows", "768", "--out", dir]);
    expect(r.status, r.err).toBe(0);
    const m = Manifest.parse(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
    expect(m.rows).toMatchObject({ range: { min: 130, max: 768 }, multiple: 2, at: 256 });
    expect(m.rows?.hostOps.map((h) => h.streams[0]!.ops.length)).toEqual([4, 4]); // two slabs of two chunks each
    expect(m.kernels.map((k) => k.template.kind)).toEqual(["local-consumer"]);
    expect(m.reference).toMatchObject({ operator: "a2a-gemm", M: 256, inputs: { A: "A_send" } });
    expect(m.rows?.fallbackBelow === undefined).toBe(m.rows?.fallbackReason === undefined);
  });

  it("prices AllToAll+GEMM's crossover with the simulator: a large shape overlaps from a row count it names", async () => {
    const dir = temp();
    const r = await run(["emit", "a2a-gemm", "--m", "8192", "--n", "4096", "--k", "4096", "--world", "4", "--any-rows", "--out", dir]);
    expect(r.status, r.err).toBe(0);
    const m = Manifest.parse(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
    expect(m.rows?.fallbackBelow).toBeGreaterThan(m.rows!.range.min);
    expect(m.rows?.fallbackReason).toMatch(/^simulated on H200_SXM: overlapping is slower than the GEMM then the collective at \d+ rows/);
    expect(r.out).toContain(`not overlapped below ${m.rows?.fallbackBelow} rows`);
  });

  it("takes the range flags only with --any-rows, as a usage error (exit 2)", async () => {
    for (const op of ["ag-gemm", "gemm-rs", "gemm-ar", "a2a-gemm"]) {
      const r = await run(["emit", op, ...small, "--max-rows", "512", "--out", temp()]);
      expect(r.status).toBe(2);
      expect(r.err).toContain("--min-rows and --max-rows go with --any-rows");
    }
  });
});

describe("ovl emit ag-moe --any-rows", () => {
  const moe = [
    "--tokens",
    "256",
    "--hidden",
    "64",
    "--intermediate",
    "64",
    "--experts",
    "4",
    "--topk",
    "2",
    "--world",
    "2",
    "--tile",
    "16x32x32",
  ];

  it("writes one AllGather + MoE for every token count: routing sizes, grid and gather over M, the tokens gathered by host copies", async () => {
    const dir = temp();
    const r = await run(["emit", "ag-moe", ...moe, "--any-rows", "--max-rows", "1024", "--out", dir]);
    expect(r.status, r.err).toBe(0);
    const m = Manifest.parse(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
    expect(m.rows).toMatchObject({ range: { min: 6, max: 1024 }, multiple: 2, at: 256 });
    expect(m.kernels.map((k) => k.template.kind)).toEqual(["moe-align-count", "moe-align-scatter", "local-consumer"]);
    expect(Object.keys(m.rows?.kernels ?? {}).sort()).toEqual([m.kernels[2]!.name, "moe_align_count", "moe_align_scatter"].sort());
    expect(m.rows?.hostOps.map((h) => h.streams[0]!.ops.length)).toEqual([2, 2]);
    expect(m.rows?.fallbackBelow === undefined).toBe(m.rows?.fallbackReason === undefined);
    expect(r.out).toContain("any token count 6..1024 (multiples of 2), described at 256");
  });

  it("prices the MoE's crossover with the simulator at a large shape, and says where it does not overlap", async () => {
    const dir = temp();
    const big = ["--tokens", "8192", "--hidden", "4096", "--intermediate", "4096", "--experts", "8", "--topk", "2", "--world", "4"];
    const r = await run(["emit", "ag-moe", ...big, "--tile", "64x128x64", "--any-rows", "--out", dir]);
    expect(r.status, r.err).toBe(0);
    const m = Manifest.parse(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
    expect(m.rows?.fallbackBelow).toBeGreaterThan(m.rows!.range.min);
    expect(m.rows?.fallbackReason).toMatch(
      /^simulated on H200_SXM: overlapping is slower than the gather then the grouped GEMM at \d+ rows/,
    );
    expect(r.out).toContain(`below ${m.rows?.fallbackBelow} tokens not overlapped`);
  });

  it("refuses another AllGather than swizzle push and the range flags without --any-rows (exit 2)", async () => {
    const ring = await run(["emit", "ag-moe", ...moe, "--any-rows", "--template", "ring", "--out", temp()]);
    expect(ring.status).toBe(2);
    expect(ring.err).toContain("ag-moe --any-rows gathers the tokens by the swizzle push AllGather");
    const alone = await run(["emit", "ag-moe", ...moe, "--max-rows", "512", "--out", temp()]);
    expect(alone.status).toBe(2);
    expect(alone.err).toContain("--min-rows and --max-rows go with --any-rows");
  });
});

describe("the rows helpers", () => {
  it("anyRowsFlags: the range with --any-rows, nothing without, a usage error for a range alone", () => {
    expect(anyRowsFlags({})).toBeUndefined();
    expect(anyRowsFlags({ anyRows: true })).toEqual({});
    expect(anyRowsFlags({ anyRows: true, minRows: 8, maxRows: 64 })).toEqual({ minRows: 8, maxRows: 64 });
    expect(() => anyRowsFlags({ minRows: 8 })).toThrow(expect.objectContaining({ exitCode: 2 }));
  });

  it("defaultMaxRows: 32768 down to a multiple of the world", () => {
    expect(defaultMaxRows(8)).toBe(32768);
    expect(defaultMaxRows(3)).toBe(32766);
    expect(defaultMaxRows(6)).toBe(32766);
  });

  it("rowSweep: multiples of the step inside the range, none when no multiple lies there", () => {
    const s = rowSweep(130, 4096, 2 * 64);
    expect(s.length).toBeGreaterThan(2);
    expect(s.every((M) => M % 128 === 0 && M >= 130 && M <= 4096)).toBe(true);
    expect(rowSweep(130, 200, 256)).toEqual([]);
  });
});
