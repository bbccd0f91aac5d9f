import { type ChunkPlan, lowerToTileSchedule, planSignals, reduceScatterDirect } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Manifest } from "../../core/manifest/schema.js";
import { EmitError } from "../../core/writer/index.js";
import { emitGemmRs } from "../../index.js";
import { codeOf } from "../../testing/errors.js";
import { rsPlan } from "../../examples/rs-plan.js";

const TILE = { BM: 64, BN: 64, BK: 32 };

function schedule(plan: ChunkPlan, M: number, N: number, K: number) {
  return lowerToTileSchedule(
    plan,
    { tensor: "C_partial", problem: { M, N, K }, tile: TILE, persistent: { numSms: 8 }, groupSizeM: 2 },
    { role: "producer" },
  );
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
        else
          out.push({
            from: op.src.rank,
            waits: [...waits],
            src: op.src.offset,
            to: op.dst.rank,
            dst: op.dst.offset,
            length: op.src.length,
            signal: op.signal!.slot,
          });
      }
    }
  }
  const seg = m.tables.find((t) => t.name === "push_segments");
  seg?.values.forEach((row, rank) => {
    for (let i = 0; i < row.length; i += 7) {
      const [src, to, dst, length, wait, arrivals, notify] = row.slice(i, i + 7) as number[];
      if (length! > 0)
        out.push({
          from: rank,
          waits: [{ slot: wait!, arrivals: arrivals! }],
          src: src!,
          to: to!,
          dst: dst!,
          length: length!,
          signal: notify!,
        });
    }
  });
  return out;
}

/**
 * Runs the producer's notifies, the deliveries and rs-reduce on numbers; returns each rank's output
 * slab. rs-reduce reads peers' rows from `partials` once their slot fills, its own in place.
 */
function simulate(m: Manifest, M: number, N: number) {
  const W = m.world;
  const rows = M / W;
  const bps = rows / TILE.BM;
  const partialOf = (q: number, i: number) => q * 1_000_000 + i;
  const notify = m.tables.find((t) => t.name === "mblock_notify_slot")!.values;
  const numPidN = Math.ceil(N / TILE.BN);
  const partials = Array.from({ length: W }, () => new Array<number>(W * rows * N).fill(Number.NaN));
  const arrived = Array.from({ length: W }, () => new Map<number, number>());
  // Per (destination, slot): the element range of `partials` the signalling copy filled.
  const landed = Array.from({ length: W }, () => new Map<number, [number, number]>());
  for (const mv of moves(m)) {
    // The rows it reads are done once every tile notifying the waited slots has run.
    for (const w of mv.waits) {
      const tiles = notify[mv.from]!.filter((s) => s === w.slot).length * numPidN;
      if (tiles !== w.arrivals)
        throw new Error(`rank ${mv.from} waits on slot ${w.slot} for ${w.arrivals} notifies, but ${tiles} tiles notify it`);
    }
    for (let mb = Math.floor(mv.src / (TILE.BM * N)); mb * TILE.BM * N < mv.src + mv.length; mb++) {
      if (!mv.waits.some((w) => w.slot === notify[mv.from]![mb]))
        throw new Error(`rank ${mv.from} sends m-block ${mb} without waiting for its tiles`);
    }
    for (let i = 0; i < mv.length; i++) partials[mv.to]![mv.dst + i] = partialOf(mv.from, mv.src + i);
    arrived[mv.to]!.set(mv.signal, (arrived[mv.to]!.get(mv.signal) ?? 0) + 1);
    landed[mv.to]!.set(mv.signal, [mv.dst, mv.dst + mv.length]);
  }
  const slotTable = m.tables.find((t) => t.name === "rs_arrival_slot")!.values;
  return partials.map((part, r) => {
    const out = new Array<number>(rows * N).fill(0);
    for (let p = 0; p < W; p++) {
      for (let mb = 0; mb < bps; mb++) {
        const slot = slotTable[r]![p * bps + mb]!;
        if (p === r) {
          if (slot !== -1) throw new Error(`rank ${r}: its own m-block ${mb} has arrival slot ${slot}, not -1 (read in place)`);
          for (let i = mb * TILE.BM * N; i < (mb + 1) * TILE.BM * N; i++) out[i]! += partialOf(r, r * rows * N + i);
          continue;
        }
        if (arrived[r]!.get(slot) !== 1)
          throw new Error(`rank ${r}: slot ${slot} signalled ${arrived[r]!.get(slot) ?? 0} times, rs-reduce waits for 1`);
        // rs-reduce reads these rows once the slot fills: the copy signalling it must have written them.
        const [lo, hi] = landed[r]!.get(slot)!;
        const first = p * rows * N + mb * TILE.BM * N;
        if (first < lo || first + TILE.BM * N > hi)
          throw new Error(`rank ${r}: slot ${slot} signals rows ${lo}..${hi}, not (rank ${p}, m-block ${mb})`);
        for (let i = mb * TILE.BM * N; i < (mb + 1) * TILE.BM * N; i++) out[i]! += part[p * rows * N + i]!;
      }
    }
    return out;
  });
}

describe("emitGemmRs", () => {
  it("deliveries + rs-reduce compute each rank's reduced slab, on both backends", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.constantFrom(1, 2),
        fc.constantFrom(1, 2),
        fc.constantFrom(64, 128),
        fc.constantFrom("copy-engine", "sm") as fc.Arbitrary<"copy-engine" | "sm">,
        (W, split, blocksPerChunk, N, backend) => {
          const M = W * split * blocksPerChunk * TILE.BM;
          const plan = rsPlan(W, M, N, split);
          const { manifest } = emitGemmRs(plan, schedule(plan, M, N, 64), { backend });
          expect(Manifest.safeParse(manifest).success).toBe(true);
          const outs = simulate(manifest, M, N);
          const rows = M / W;
          outs.forEach((out, r) => {
            const want = Array.from({ length: rows * N }, (_, i) =>
              Array.from({ length: W }, (_, q) => q * 1_000_000 + r * rows * N + i).reduce((a, b) => a + b, 0),
            );
            expect(out).toEqual(want);
          });
        },
      ),
      { numRuns: 25 },
    );
  });

  it("copy engine: per rank, the waits, then one copy carrying one signal per chunk", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.constantFrom(1, 2, 4), fc.constantFrom(1, 2), (W, split, blocksPerChunk) => {
        const M = W * split * blocksPerChunk * TILE.BM;
        const N = 128;
        const plan = rsPlan(W, M, N, split);
        const sched = schedule(plan, M, N, 64);
        const { manifest } = emitGemmRs(plan, sched);
        for (const h of manifest.hostOps) {
          const ops = h.streams.flatMap((s) => s.ops);
          const copies = ops.filter((op) => op.kind === "copy");
          const waits = ops.filter((op) => op.kind === "wait");
          // Every peer gets `split` chunks of this rank's partial rows; its own slab is reduced in place.
          expect(copies.length).toBe((W - 1) * split);
          expect(copies.every((c) => c.signal !== undefined && c.src.length === blocksPerChunk * TILE.BM * N)).toBe(true);
          expect(copies.every((c) => c.kind === "copy" && c.dst.rank !== h.rank)).toBe(true);
          const bps = M / W / TILE.BM;
          const notifySlots = manifest.tables.find((t) => t.name === "mblock_notify_slot")!.values[h.rank]!;
          const doneSlots = new Set(notifySlots.filter((_s, mb) => Math.floor(mb / bps) !== h.rank));
          expect(waits.length).toBe(doneSlots.size);
          expect(new Set(waits.map((w) => (w.kind === "wait" ? w.slot : -1)))).toEqual(doneSlots);
          expect(ops.length).toBe(waits.length + copies.length);
        }
      }),
      { numRuns: 20 },
    );
  });

  it("the producer computes peers' slabs first, in sending order, and its own slab last", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.constantFrom(1, 2),
        fc.constantFrom(1, 2),
        fc.constantFrom("copy-engine", "sm") as fc.Arbitrary<"copy-engine" | "sm">,
        (W, split, blocksPerChunk, backend) => {
          const M = W * split * blocksPerChunk * TILE.BM;
          const N = 64;
          const plan = rsPlan(W, M, N, split);
          const { manifest } = emitGemmRs(plan, schedule(plan, M, N, 64), { backend });
          const bps = M / W / TILE.BM;
          const order = manifest.tables.find((t) => t.name === "mblock_order")!.values;
          const sent = moves(manifest);
          for (let r = 0; r < W; r++) {
            const slabs = Array.from({ length: W }, (_, i) => (r + 1 + i) % W);
            const want = slabs.flatMap((q) => Array.from({ length: bps }, (_, k) => q * bps + k));
            expect(order[r]).toEqual(want);
            // The comm stream sends rows in the order they are computed.
            const firstBlocks = sent.filter((mv) => mv.from === r).map((mv) => mv.src / (TILE.BM * N));
            expect(firstBlocks).toEqual([...firstBlocks].sort((a, b) => want.indexOf(a) - want.indexOf(b)));
            expect(sent.some((mv) => mv.from === r && mv.to === r)).toBe(false);
          }
        },
      ),
      { numRuns: 20 },
    );
  });

  it("rs-reduce reads one arrival slot per delivered chunk", () => {
    const plan = rsPlan(2, 512, 64, 2);
    const sched = schedule(plan, 512, 64, 64);
    const ce = emitGemmRs(plan, sched).manifest;
    const table = (m: Manifest) => m.tables.find((t) => t.name === "rs_arrival_slot")!.values;
    // 4 m-blocks per slab in 2 chunks of 2: each chunk's m-blocks share its first m-block's slot;
    // a rank's own m-blocks are read in place (-1).
    expect(table(ce)).toEqual([
      [-1, -1, -1, -1, 4, 4, 6, 6],
      [0, 0, 2, 2, -1, -1, -1, -1],
    ]);
    expect(ce.kernels[1]!.args.map((a) => a.name)).toContain("slot_ptr");
    expect(table(emitGemmRs(plan, sched, { backend: "sm" }).manifest)).toEqual([
      [-1, -1, -1, -1, 4, 5, 6, 7],
      [0, 1, 2, 3, -1, -1, -1, -1],
    ]);
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
    expect(manifest.kernels[2]!.grid).toEqual([{ kind: "num-sms", cap: 2 }]); // one per SM, at most 2 m-blocks × 1 n-block
    // The producer leaves the push kernel's SMs free; a copy-engine producer takes them all.
    expect(manifest.kernels[0]!.grid).toEqual([{ kind: "num-sms", cap: 4, reserve: 16 }]);
    expect(emitGemmRs(plan, schedule(plan, 256, 64, 64), { backend: "sm", commSms: 8 }).manifest.kernels[0]!.grid).toEqual([
      { kind: "num-sms", cap: 4, reserve: 8 },
    ]);
    expect(emitGemmRs(plan, schedule(plan, 256, 64, 64)).manifest.kernels[0]!.grid).toEqual([{ kind: "num-sms", cap: 4 }]);
    expect(emitGemmRs(plan, schedule(plan, 256, 64, 64), { reducePrograms: 1 }).manifest.kernels.at(-1)!.grid).toEqual([1]);
    // Under 256-row m-blocks the reduction's tile narrows to 256×64 (a 256×128 one ran 3.5× slower);
    // a given reduceBlockN stands.
    const tall = rsPlan(2, 1024, 256, 1);
    const tallSchedule = lowerToTileSchedule(
      tall,
      { tensor: "C_partial", problem: { M: 1024, N: 256, K: 64 }, tile: { BM: 256, BN: 128, BK: 64 }, persistent: { numSms: 8 } },
      { role: "producer" },
    );
    const tallReduce = emitGemmRs(tall, tallSchedule).manifest.kernels.at(-1)!;
    expect([tallReduce.template.kind, tallReduce.constexprs]).toEqual(["rs-reduce", { WORLD: 2, BLOCK_M: 256, BLOCK_N: 64 }]);
    expect(emitGemmRs(tall, tallSchedule, { reduceBlockN: 128 }).manifest.kernels.at(-1)!.constexprs).toEqual({
      WORLD: 2,
      BLOCK_M: 256,
      BLOCK_N: 128,
    });
    const narrow = emitGemmRs(plan, schedule(plan, 256, 64, 64), { backend: "sm", commWarps: 4, commBlock: 2048 }).manifest.kernels[1]!;
    expect([narrow.numWarps, narrow.constexprs]).toEqual([4, { BLOCK: 2048 }]);
    expect([manifest.kernels[1]!.numWarps, manifest.kernels[1]!.constexprs]).toEqual([8, { BLOCK: 8192 }]);
    // At most commSms push programs, as SMs: a runner with fewer to give (every rank on one GPU) launches fewer.
    expect(manifest.kernels[1]!.grid).toEqual([{ kind: "num-sms", cap: 2 }]); // 2 segments: the peer's m-blocks
    expect(
      emitGemmRs(rsPlan(2, 4096, 64, 1), schedule(rsPlan(2, 4096, 64, 1), 4096, 64, 64), { backend: "sm" }).manifest.kernels[1]!.grid,
    ).toEqual([{ kind: "num-sms", cap: 16 }]);
    expect(() => emitGemmRs(plan, schedule(plan, 256, 64, 64), { backend: "sm", commWarps: 3 })).toThrow(EmitError);
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
    const noCompute = planSignals(
      reduceScatterDirect({ tensor: { name: "C", shape: [256, 64], dtype: "bf16" }, src: "C_partial", axis: 0, mesh: [2] }),
    );
    expect(codeOf(() => emitGemmRs(noCompute, schedule(noCompute, 256, 64, 64)))).toBe("bad-plan");
    const ragged = rsPlan(2, 192, 64, 1);
    expect(codeOf(() => emitGemmRs(ragged, schedule(ragged, 192, 64, 64)))).toBe("bad-param");
    const plan = rsPlan(2, 256, 64, 1);
    expect(codeOf(() => emitGemmRs(plan, schedule(plan, 256, 64, 64), { backend: "nccl" as "sm" }))).toBe("bad-param");
  });
});
