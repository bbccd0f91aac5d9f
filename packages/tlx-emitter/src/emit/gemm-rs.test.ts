import { type ChunkPlan, lowerToTileSchedule, planSignals, reduceScatterDirect, reduceScatterRing } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Manifest } from "../manifest/schema.js";
import { EmitError } from "../writer/index.js";
import { emitGemmRs } from "./index.js";

const TILE = { BM: 64, BN: 64, BK: 32 };

function rsPlan(world: number, M: number, N: number, split: number, ring = false): ChunkPlan {
  const o = { tensor: { name: "C", shape: [M, N], dtype: "bf16" as const }, src: "C_partial", axis: 0, mesh: [world], split, afterCompute: true };
  return planSignals(ring ? reduceScatterRing(o) : reduceScatterDirect(o));
}

function schedule(plan: ChunkPlan, M: number, N: number, K: number) {
  return lowerToTileSchedule(plan, { tensor: "C_partial", problem: { M, N, K }, tile: TILE, persistent: { numSms: 8 }, groupSizeM: 2 }, { role: "producer" });
}

function codeOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    return e instanceof EmitError ? e.code : String(e);
  }
  return undefined;
}

interface Move {
  from: number;
  waits: { slot: number; arrivals: number }[];
  src: number;
  to: number;
  dst: number;
  length: number;
  signal: number;
}

/** The deliveries of a manifest, from its host ops (copy engine) or its sm-push segment table. */
function moves(m: Manifest): Move[] {
  const out: Move[] = [];
  for (const h of m.hostOps) {
    for (const s of h.streams) {
      const waits: { slot: number; arrivals: number }[] = [];
      for (const op of s.ops) {
        if (op.kind === "wait") waits.push({ slot: op.slot, arrivals: op.arrivals });
        else out.push({ from: op.src.rank, waits: [...waits], src: op.src.offset, to: op.dst.rank, dst: op.dst.offset, length: op.src.length, signal: op.signal!.slot });
      }
    }
  }
  const seg = m.tables.find((t) => t.name === "push_segments");
  seg?.values.forEach((row, rank) => {
    for (let i = 0; i < row.length; i += 7) {
      const [src, to, dst, length, wait, arrivals, notify] = row.slice(i, i + 7) as number[];
      if (length! > 0) out.push({ from: rank, waits: [{ slot: wait!, arrivals: arrivals! }], src: src!, to: to!, dst: dst!, length: length!, signal: notify! });
    }
  });
  return out;
}

/** Runs the producer's notifies, the deliveries and rs-reduce on numbers; returns each rank's output slab. */
function simulate(m: Manifest, M: number, N: number) {
  const W = m.world;
  const rows = M / W;
  const bps = rows / TILE.BM;
  const partialOf = (q: number, i: number) => q * 1_000_000 + i;
  const notify = m.tables.find((t) => t.name === "mblock_notify_slot")!.values;
  const numPidN = Math.ceil(N / TILE.BN);
  const partials = Array.from({ length: W }, () => new Array<number>(W * rows * N).fill(Number.NaN));
  const arrived = Array.from({ length: W }, () => new Map<number, number>());
  for (const mv of moves(m)) {
    // The rows it reads are done once every tile notifying the waited slots has run.
    for (const w of mv.waits) {
      const tiles = notify[mv.from]!.filter((s) => s === w.slot).length * numPidN;
      if (tiles !== w.arrivals) throw new Error(`rank ${mv.from} waits on slot ${w.slot} for ${w.arrivals} notifies, but ${tiles} tiles notify it`);
    }
    for (let mb = Math.floor(mv.src / (TILE.BM * N)); mb * TILE.BM * N < mv.src + mv.length; mb++) {
      if (!mv.waits.some((w) => w.slot === notify[mv.from]![mb])) throw new Error(`rank ${mv.from} sends m-block ${mb} without waiting for its tiles`);
    }
    for (let i = 0; i < mv.length; i++) partials[mv.to]![mv.dst + i] = partialOf(mv.from, mv.src + i);
    arrived[mv.to]!.set(mv.signal, (arrived[mv.to]!.get(mv.signal) ?? 0) + 1);
  }
  return partials.map((part, r) => {
    const out = new Array<number>(rows * N).fill(0);
    for (let p = 0; p < W; p++) {
      for (let mb = 0; mb < bps; mb++) {
        if (arrived[r]!.get(p * bps + mb) !== 1) throw new Error(`rank ${r}: slot ${p * bps + mb} signalled ${arrived[r]!.get(p * bps + mb) ?? 0} times, rs-reduce waits for 1`);
        for (let i = mb * TILE.BM * N; i < (mb + 1) * TILE.BM * N; i++) out[i]! += part[p * rows * N + i]!;
      }
    }
    return out;
  });
}

describe("emitGemmRs", () => {
  it("deliveries + rs-reduce compute each rank's reduced slab, on both backends", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.constantFrom(1, 2), fc.constantFrom(1, 2), fc.constantFrom(64, 128), fc.constantFrom("copy-engine", "sm") as fc.Arbitrary<"copy-engine" | "sm">, (W, split, blocksPerChunk, N, backend) => {
        const M = W * split * blocksPerChunk * TILE.BM;
        const plan = rsPlan(W, M, N, split);
        const { manifest } = emitGemmRs(plan, schedule(plan, M, N, 64), { backend });
        expect(Manifest.safeParse(manifest).success).toBe(true);
        const outs = simulate(manifest, M, N);
        const rows = M / W;
        outs.forEach((out, r) => {
          const want = Array.from({ length: rows * N }, (_, i) => Array.from({ length: W }, (_, q) => q * 1_000_000 + r * rows * N + i).reduce((a, b) => a + b, 0));
          expect(out).toEqual(want);
        });
      }),
      { numRuns: 25 },
    );
  });

  it("lays out kernels, slots and buffers as the runner expects", () => {
    const plan = rsPlan(2, 256, 64, 1);
    const { manifest, files } = emitGemmRs(plan, schedule(plan, 256, 64, 64), { backend: "sm" });
    expect(manifest.kernels.map((k) => [k.name, k.template.kind, k.stream])).toEqual([
      ["gemm_producer", "gemm-producer", "compute"],
      ["sm_push", "sm-push", "comm"],
      ["rs_reduce", "rs-reduce", "compute"],
    ]);
    expect(files.map((f) => f.path)).toEqual(["gemm_producer.py", "sm_push.py", "rs_reduce.py"]);
    expect(manifest.kernels[2]!.template.params).toEqual({ WORLD: 2, BLOCK_M: 64, BLOCK_N: 128, N: 64, rows_per_rank: 128 });
    expect(manifest.kernels[2]!.grid).toEqual([2, 1]);
    expect(manifest.buffers.map((b) => [b.name, b.shape, b.symmetric])).toEqual([
      ["gemm_a", [256, 64], false],
      ["gemm_b", [64, 64], false],
      ["C_partial", [256, 64], false],
      ["partials", [2, 128, 64], true],
      ["rs_out", [128, 64], false],
      ["signals", [manifest.signals.slots], true],
    ]);
    expect(manifest.hostOps).toEqual([]);
    // Arrival slots first (W × m-blocks per slab), then the tile-done slots.
    const notify = manifest.tables.find((t) => t.name === "mblock_notify_slot")!.values;
    for (const row of notify) for (const s of row) expect(s).toBeGreaterThanOrEqual(4);
  });

  it("refuses plans it cannot realise", () => {
    // A ring forwards partial sums through other ranks: neither its first hop nor its chained steps are deliveries.
    const ring = rsPlan(3, 384, 64, 1, true);
    expect(codeOf(() => emitGemmRs(ring, schedule(ring, 384, 64, 64)))).toBe("bad-plan");
    const chained = { ...ring, ranks: ring.ranks.map((r) => ({ ...r, streams: r.streams.map((ops) => ops.slice(1)) })) };
    expect(codeOf(() => emitGemmRs(chained, schedule(ring, 384, 64, 64)))).toBe("unsupported-dependency");
    const noCompute = planSignals(reduceScatterDirect({ tensor: { name: "C", shape: [256, 64], dtype: "bf16" }, src: "C_partial", axis: 0, mesh: [2] }));
    expect(codeOf(() => emitGemmRs(noCompute, schedule(noCompute, 256, 64, 64)))).toBe("bad-plan");
    const ragged = rsPlan(2, 192, 64, 1);
    expect(codeOf(() => emitGemmRs(ragged, schedule(ragged, 192, 64, 64)))).toBe("bad-param");
    const plan = rsPlan(2, 256, 64, 1);
    expect(codeOf(() => emitGemmRs(plan, schedule(plan, 256, 64, 64), { backend: "nvshmem" as "sm" }))).toBe("bad-param");
  });
});
