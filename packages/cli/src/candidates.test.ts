import fc from "fast-check";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { computeKey, type RankedCompute } from "@ovl/sim";
import { Manifest } from "@ovl/tlx-emitter";
import { modelPicks, neighbours, realisedConfig } from "./candidates.js";
import { ovl } from "./testing.js";

const temp = () => mkdtempSync(join(tmpdir(), "ovl-candidates-"));

interface Listed {
  $schema: string;
  operator: string;
  role: string;
  problem: { M: number; N: number; K: number; world: number; split: number; backend: string };
  gridSms: number;
  commSms?: number;
  table: string;
  topK: number;
  candidates: {
    rank: number;
    source: string;
    key: string;
    config: Record<string, number | string>;
    predictedMs: number;
    flags: string[];
    dir?: string;
  }[];
  refused: { key: string; source: string; reason: string }[];
}

/** The configuration of the compute kernel a written manifest runs. */
function manifestConfig(path: string) {
  const m = Manifest.parse(JSON.parse(readFileSync(path, "utf8")));
  return realisedConfig({ files: [], manifest: m });
}

const AG = ["--m", "24576", "--n", "2560", "--k", "5120", "--world", "3"];

describe("ovl candidates", () => {
  it("lists the table's pick first, then the nearest shapes' winners, the pick's neighbours, then the model's, each distinct and compiled as emit would", async () => {
    const r = await ovl(["candidates", "ag-gemm", ...AG, "--json"]);
    expect(r.status, r.stderr).toBe(0);
    const l = JSON.parse(r.stdout) as Listed;
    expect(l).toMatchObject({ $schema: "ovl.compute-candidates/v1", operator: "ag-gemm", role: "consumer", topK: 8, gridSms: 132 });
    expect(l.problem).toMatchObject({ M: 24576, N: 2560, K: 5120, world: 3, split: 2, backend: "copy-engine" });
    expect(l.table).toMatch(/^h200 table, nearest shape/);
    const c = l.candidates;
    expect(c.length).toBeGreaterThanOrEqual(6);
    expect(c.length).toBeLessThanOrEqual(8);
    expect(c.map((x) => x.rank)).toEqual(c.map((_, i) => i));
    expect(c[0]!.source).toBe("table");
    const order = { table: 0, default: 0, nearest: 1, neighbour: 2, model: 3 } as Record<string, number>;
    expect(c.map((x) => order[x.source]!)).toEqual([...c.map((x) => order[x.source]!)].sort());
    expect(c.filter((x) => x.source === "nearest").length).toBeLessThanOrEqual(2);
    const near = c.filter((x) => x.source === "neighbour");
    expect(near.length).toBeGreaterThanOrEqual(1);
    expect(near.length).toBeLessThanOrEqual(3);
    const neighbourKeys = new Set(neighbours(c[0]!.config as never).map((x) => computeKey(x)));
    for (const x of near) expect(neighbourKeys.has(x.key)).toBe(true);
    expect(new Set(c.map((x) => x.key)).size).toBe(c.length);
    for (const x of c) {
      expect(x.key).toBe(computeKey(x.config as never));
      expect(x.flags).toEqual([
        "--tile",
        `${x.config.BM}x${x.config.BN}x${x.config.BK}`,
        "--group-m",
        String(x.config.groupM),
        "--num-warps",
        String(x.config.numWarps),
        "--num-stages",
        String(x.config.numStages),
        "--body",
        String(x.config.body),
      ]);
      expect(x.predictedMs).toBeGreaterThan(0);
    }
    // The table's pick is what `ovl emit` compiles without a tile; each other candidate what its flags compile.
    const out = temp();
    const plain = await ovl(["emit", "ag-gemm", ...AG, "--out", join(out, "plain"), "--json"]);
    expect(plain.status, plain.stderr).toBe(0);
    expect(computeKey(manifestConfig(JSON.parse(plain.stdout).manifest))).toBe(c[0]!.key);
    const last = c[c.length - 1]!;
    const pinned = await ovl(["emit", "ag-gemm", ...AG, ...last.flags, "--out", join(out, "pinned"), "--json"]);
    expect(pinned.status, pinned.stderr).toBe(0);
    expect(computeKey(manifestConfig(JSON.parse(pinned.stdout).manifest))).toBe(last.key);
    // A smaller k is a prefix of the same order.
    const three = JSON.parse((await ovl(["candidates", "ag-gemm", ...AG, "--top-k", "3", "--json"])).stdout) as Listed;
    expect(three.candidates.map((x) => x.key)).toEqual(c.slice(0, 3).map((x) => x.key));
  });

  it("ranks a GEMM+RS producer on the SMs its push kernel leaves, refuses tiles off its row blocks, and writes each candidate with --out", async () => {
    const out = temp();
    const args = ["candidates", "gemm-rs", "--m", "4608", "--n", "4096", "--k", "1376", "--world", "4", "--backend", "sm", "--split", "1"];
    const r = await ovl([...args, "--top-k", "8", "--out", out, "--json"]);
    expect(r.status, r.stderr).toBe(0);
    const l = JSON.parse(r.stdout) as Listed;
    expect(l.role).toBe("producer");
    expect(l.commSms).toBeGreaterThan(0);
    expect(l.gridSms).toBe(132 - l.commSms!);
    expect(l.candidates.length).toBe(8);
    // 4608 rows over 4 ranks: 1152-row slabs, not whole 256-row blocks.
    expect(l.refused.some((x) => /256 rows/.test(x.reason) && x.key.includes(" 256x"))).toBe(true);
    for (const x of l.candidates) {
      expect(x.config.BM).not.toBe(256);
      expect(x.dir).toBe(join(out, `c${x.rank}`));
      expect(computeKey(manifestConfig(join(x.dir!, "manifest.json")))).toBe(x.key);
    }
    const text = await ovl([...args, "--top-k", "2"]);
    expect(text.status, text.stderr).toBe(0);
    expect(text.stdout).toContain("producer GEMM on");
    expect(text.stdout).toMatch(/0 {2}table/);
  });

  it("refuses operators whose compute no tuned table decides, and a tile it would vary", async () => {
    const ar = await ovl(["candidates", "gemm-ar", "--m", "4096", "--n", "4096", "--k", "1024", "--world", "4"]);
    expect(ar.status).toBe(2);
    expect(ar.stderr).toContain("this command takes ag-gemm or gemm-rs, not 'gemm-ar'");
    const tiled = await ovl(["candidates", "ag-gemm", ...AG, "--tile", "128x128x64"]);
    expect(tiled.status).toBe(2);
    const rows = await ovl(["candidates", "ag-gemm", ...AG, "--max-rows", "8192"]);
    expect(rows.status).toBe(2);
    expect(rows.stderr).toContain("--max-rows go with --any-rows");
  });
});

describe("modelPicks", () => {
  const r = (body: string, BM: number, BN: number, BK: number, s: number, w: number, ms: number): RankedCompute => {
    const config = { body, BM, BN, BK, groupM: 8, numStages: s, numWarps: w };
    return { config, key: computeKey(config), predictedMs: ms };
  };
  it("takes every tile footprint's best first (the shallowest ring among equals), then the other kernel shapes", () => {
    const ranked = [
      r("flat", 128, 256, 32, 4, 8, 1.0),
      r("flat", 128, 256, 64, 3, 8, 1.0),
      r("plain", 128, 256, 64, 3, 8, 1.01),
      r("flat", 256, 128, 64, 3, 8, 1.02),
      r("flat", 128, 128, 64, 5, 4, 1.2),
    ];
    expect(modelPicks(ranked).map((x) => x.key)).toEqual([
      "flat 128x256x64 g8 s3 w8",
      "flat 256x128x64 g8 s3 w8",
      "flat 128x128x64 g8 s5 w4",
      "flat 128x256x32 g8 s4 w8",
      "plain 128x256x64 g8 s3 w8",
    ]);
  });
});

describe("neighbours", () => {
  const config = fc.record({
    body: fc.constantFrom("gemm_tma_persistent_flat", "gemm_tma_persistent_streamk", "gemm_producer_tma_flat"),
    BM: fc.constantFrom(64, 128, 256),
    BN: fc.constantFrom(64, 128, 256),
    BK: fc.constantFrom(32, 64, 128),
    groupM: fc.constantFrom(1, 4, 8, 16),
    numStages: fc.integer({ min: 2, max: 6 }),
    numWarps: fc.constantFrom(4, 8),
  });
  it("changes exactly one setting of the configuration, never repeats it or itself, and keeps rings of two stages or more", () => {
    fc.assert(
      fc.property(config, (c) => {
        const n = neighbours(c);
        const keys = n.map((x) => computeKey(x));
        expect(new Set(keys).size).toBe(keys.length);
        expect(keys).not.toContain(computeKey(c));
        for (const x of n) {
          const changed = (Object.keys(c) as (keyof typeof c)[]).filter((k) => x[k] !== c[k]);
          // The transposed tile changes BM and BN together; every other neighbour one setting.
          expect(changed.length === 1 || (changed.length === 2 && x.BM === c.BN && x.BN === c.BM)).toBe(true);
          expect(x.numStages).toBeGreaterThanOrEqual(2);
        }
      }),
    );
  });
  it("starts with the last-wave twin body, then the group sizes, the ring depths and the transposed tile", () => {
    const c = { body: "gemm_tma_persistent_streamk", BM: 128, BN: 256, BK: 64, groupM: 8, numStages: 3, numWarps: 8 };
    expect(neighbours(c).map((x) => computeKey(x))).toEqual([
      "gemm_tma_persistent_flat 128x256x64 g8 s3 w8",
      "gemm_tma_persistent_streamk 128x256x64 g4 s3 w8",
      "gemm_tma_persistent_streamk 128x256x64 g16 s3 w8",
      "gemm_tma_persistent_streamk 128x256x64 g8 s2 w8",
      "gemm_tma_persistent_streamk 128x256x64 g8 s4 w8",
      "gemm_tma_persistent_streamk 256x128x64 g8 s3 w8",
    ]);
  });
});

describe("ovl emit --num-warps --num-stages --body", () => {
  const emit = (...extra: string[]) =>
    ovl(["emit", "ag-gemm", "--m", "8192", "--n", "1376", "--k", "4096", "--world", "8", "--out", temp(), "--json", ...extra]);

  it("compiles exactly the configuration named, and keeps the table's tile for warps or stages alone", async () => {
    const pinned = await emit(
      "--tile",
      "128x128x64",
      "--group-m",
      "16",
      "--num-warps",
      "4",
      "--num-stages",
      "5",
      "--body",
      "gemm_tma_persistent_streamk",
    );
    expect(pinned.status, pinned.stderr).toBe(0);
    expect(computeKey(manifestConfig(JSON.parse(pinned.stdout).manifest))).toBe("gemm_tma_persistent_streamk 128x128x64 g16 s5 w4");
    const stages = await emit("--num-stages", "4");
    expect(stages.status, stages.stderr).toBe(0);
    const got = manifestConfig(JSON.parse(stages.stdout).manifest);
    expect(got.numStages).toBe(4);
    expect(JSON.parse(stages.stdout).compute.source).toBe("table");
    expect(existsSync(JSON.parse(stages.stdout).manifest)).toBe(true);
  });

  it("refuses a body without a tile, with --kernel, or of another operator, and stages the compiler refuses", async () => {
    const noTile = await emit("--body", "gemm_tma_persistent_flat");
    expect(noTile.status).toBe(2);
    expect(noTile.stderr).toContain("give its --tile too");
    const other = await emit("--tile", "128x128x64", "--body", "gemm_producer");
    expect(other.status).toBe(2);
    expect(other.stderr).toContain(
      "ag-gemm's built-in bodies are gemm_tma_persistent, gemm_tma_persistent_flat, gemm_tma_persistent_streamk",
    );
    const own = await emit("--tile", "128x128x64", "--body", "gemm_tma_persistent_flat", "--kernel", "mine.py");
    expect(own.status).toBe(2);
    expect(own.stderr).toContain("--body names a built-in body; --kernel brings your own");
    const deep = await emit("--num-stages", "9");
    expect(deep.status).toBe(2);
    expect(deep.stderr).toContain("numStages must be at most 8");
  });
});
